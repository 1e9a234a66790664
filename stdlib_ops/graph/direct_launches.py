"""A compiled CPU graph's launches as direct C calls (`DirectLaunches`): the per-call cost of a graph of many small
kernels.

A kernel's checked call (`CompiledModule.__call__`) converts and checks every argument (dtype, shape, contiguity,
writeability) and, after the call, the canaries around the arrays the runtime allocated: some 15 us a launch, most
of a small kernel's time. A graph's launches need none of it: the graph checked its inputs before the first launch,
and every other array is one it made (its constants, its planned buffers, its new outputs) with the shape and dtype
the plan gives. So, for each set of the symbolic sizes' values, the launches are prepared once: each kernel's C
function taking addresses (`CompiledModule.direct_function`), with the addresses of the constants and buffers it is
passed; a call takes the addresses of its inputs and outputs and makes the C calls. A launch whose kernel has no
such function (one with size parameters, assertions or printf), or whose constant cannot be passed as it lies (a
read-only array), keeps the checked call; a call whose input cannot be (read-only, say) runs every launch checked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from codegen.runtime import array_address
from stdlib_ops.graph.memory_plan import Launch, Plan, Ref

Argument = int | Ref
"""A direct call's argument: a fixed address, or the ref of an array whose address is taken per call."""


class DirectLaunches:
    """The launches of `plan` for one set of sizes: `(C function, arguments)` for each launch that has a direct
    function, None for one that keeps the checked call (`run`)."""

    def __init__(self, plan: Plan, modules: Sequence[Any], fixed: dict[Ref, Any]) -> None:
        """Prepare the launches of `plan` (kernels `modules`), taking the addresses of the arrays in `fixed` (the
        constants and the planned buffers) now."""
        self.plan = plan
        self.calls: list[tuple[Callable[..., None], list[Argument]] | None] = []
        self.per_call: set[Ref] = set()  # the refs whose addresses each call takes: inputs and outputs
        for launch in plan.launches:
            direct_function = getattr(modules[launch.kernel], "direct_function", None)  # a kernel may be any callable
            function = direct_function() if direct_function is not None else None
            arguments = _arguments(launch.args, fixed) if function is not None else None
            if arguments is None:
                self.calls.append(None)
                continue
            self.per_call.update(a for a in arguments if not isinstance(a, int))
            self.calls.append((function, arguments))

    def run(self, values: dict[Ref, Any], checked: Callable[[Launch], None], times: list[float] | None = None) -> bool:
        """Launch every kernel over `values`, the unprepared ones by `checked` (with `times`, each launch's seconds
        appended to it); False, having launched nothing, where an input or output cannot be passed by its address
        (the caller then makes checked calls)."""
        try:
            addresses = {ref: array_address(values[ref]) for ref in self.per_call}
        except (TypeError, ValueError):
            return False
        for launch, prepared in zip(self.plan.launches, self.calls):
            start = time.perf_counter() if times is not None else 0.0
            if prepared is None:
                checked(launch)
            else:
                function, arguments = prepared
                function(*[a if isinstance(a, int) else addresses[a] for a in arguments])
            if times is not None:
                times.append(time.perf_counter() - start)
        return True


def _arguments(refs: Sequence[Ref], fixed: dict[Ref, Any]) -> list[Argument] | None:
    """A launch's direct arguments: the address of each array of `fixed` it is passed, the ref of every other
    array; None where it takes a size or a fixed array that cannot be passed by its address."""
    arguments: list[Argument] = []
    for ref in refs:
        if ref[0] == "size":
            return None
        if ref in fixed:
            try:
                arguments.append(array_address(fixed[ref]))
            except (TypeError, ValueError):
                return None
        else:
            arguments.append(ref)
    return arguments
