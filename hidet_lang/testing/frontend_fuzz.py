"""Frontend fuzzing: every mutant of a valid program must build, or fail with a located DSL error.

``check_mutants(sources, rng)`` mutates each source (``hidet_lang.testing.mutate``), imports it (which runs
``@hidet.script``), lowers each resulting module through the pipeline, and builds all the mutants that lowered in
one module (splitting the batch in halves to find the culprit when that build fails). Each mutant's ``Verdict``
is ``ok`` (built), ``dsl_error`` (a ``DSLError`` with a span, or a ``TypeError``/``ValueError`` from lowering or
the build, as documented), ``not_python`` (the mutant is not valid Python) or a finding: ``internal`` (any other
exception, or a ``DSLError`` without a span) or ``hang`` (a step over the time limit, enforced with ``SIGALRM`` in
the main thread). The findings so far are regression tests in tests/codegen/test_fuzz_findings.py.
"""

from __future__ import annotations

import random
import signal
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from hidet_lang.errors import DSLError
from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir.func import DEVICE_KINDS
from hidet_lang.passes.pipeline import lower
from hidet_lang.testing.mutate import mutate
from hidet_lang.testing.programs import load_module

__all__ = ["StepTimeout", "Verdict", "check_mutants", "classify"]

T = TypeVar("T")


class StepTimeout(Exception):
    """A step of the fuzzer ran past its time limit (a hang)."""


@dataclass
class Verdict:
    """The fate of one mutant: ``kind`` is 'ok', 'dsl_error', 'not_python', 'internal' or 'hang';
    ``detail`` the error."""

    source: str
    mutations: list[str]
    kind: str
    detail: str = ""
    stage: str = ""  # 'parse', 'lower' or 'build'

    @property
    def is_finding(self) -> bool:
        """True for an internal error or a hang."""
        return self.kind in ("internal", "hang")


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise StepTimeout(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def classify(error: BaseException, stage: str) -> tuple[str, str]:
    """(kind, detail) for an exception raised at ``stage`` (see ``Verdict``)."""
    detail = "".join(traceback.format_exception_only(type(error), error)).strip()
    if isinstance(error, StepTimeout):
        return "hang", detail
    if isinstance(error, DSLError):
        return ("dsl_error", detail) if error.span is not None else ("internal", "DSLError without a span: " + detail)
    if stage in ("lower", "build") and type(error) in (TypeError, ValueError):
        return "dsl_error", detail  # documented: a module that cannot be built at all
    if stage == "parse" and type(error) is SyntaxError:
        return "not_python", detail  # the mutant is not Python: nothing for the DSL to judge
    return "internal", f"{type(error).__module__}.{type(error).__name__}: {detail}\n" + "".join(
        traceback.format_tb(error.__traceback__)[-3:])


def _step(verdict: Verdict, stage: str, limit: float, action: Callable[[], T]) -> T | None:
    try:
        with _time_limit(limit):
            return action()
    except Exception as e:  # noqa: BLE001 - every exception is classified
        verdict.kind, verdict.detail = classify(e, stage)
        verdict.stage = stage
        return None


def _build_all(items: list[tuple[Verdict, ScriptModule]], limit: float) -> None:
    """Build the modules of ``items`` together; on failure, halve the batch until each failure is one mutant's."""
    combined = ScriptModule()
    for _, module in items:
        for f in module.functions:
            combined.add(f)
    probe = Verdict("", [], "ok")
    _step(probe, "build", limit * len(items), combined.build)
    if probe.kind == "ok":
        return
    if len(items) == 1:
        verdict = items[0][0]
        verdict.kind, verdict.detail, verdict.stage = probe.kind, probe.detail, "build"
        return
    half = len(items) // 2
    _build_all(items[:half], limit)
    _build_all(items[half:], limit)


def check_mutants(sources: list[str], rng: random.Random, *, mutations: int = 1, limit: float = 20.0,
                  directory: str | None = None) -> list[Verdict]:
    """Mutate each of ``sources`` (Python modules defining a script module ``module`` whose kernels are named
    uniquely across ``sources``), and judge every mutant (see the module docstring)."""
    verdicts: list[Verdict] = []
    lowered: list[tuple[Verdict, ScriptModule]] = []
    for source in sources:
        text, applied = mutate(source, rng, mutations)
        verdict = Verdict(text, applied, "ok")
        verdicts.append(verdict)
        module = _step(verdict, "parse", limit, partial(load_module, text, directory))
        if module is None or _step(verdict, "lower", limit, partial(_lower, module)) is None:
            continue
        lowered.append((verdict, module))
    for on_device in (False, True):  # CPU modules and CUDA modules are built apart
        group = [item for item in lowered if _is_cuda(item[1]) == on_device]
        if group:
            _build_all(group, limit)
    return verdicts


def _lower(module: ScriptModule) -> object:
    return lower(module.ir_module())


def _is_cuda(module: ScriptModule) -> bool:
    return any(f.ir.attrs.kind in DEVICE_KINDS for f in module.functions)
