"""What a child process does for the page: compile a program (every stage of everything it defines) or run it
(random inputs of the typed sizes, checked against the reference box and timed against it; on the CUDA emulator,
profiled by one more call: `profile_view`)."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from codegen.runtime.argument_checks import numpy_dtype
from hidet_lang.explorer.ir_lines import step_lines
from hidet_lang.explorer.pictures import pictures_of
from hidet_lang.explorer.profile_view import profiled_call
from hidet_lang.explorer.program import PROGRAM_FILE, Workspace
from hidet_lang.explorer.stages import dump_folder, graph_stages, module_stages, module_target, workspace_dumps
from hidet_lang.explorer.tolerance import Tolerance, chosen_tolerance, graph_terms, kernel_terms
from hidet_lang.explorer.verdict import Compared, Verdict, judge
from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir.evaluate import evaluate
from hidet_lang.ir.functor import collect
from hidet_lang.ir.stmt import ForMappingStmt
from hidet_lang.ir.types import DataType, TensorType
from hidet_lang.target import Target

TIMING_BUDGET_S = 0.25  # per timed function: calls until this much time has passed (at least 3, at most 100)


def progress(message: str) -> None:
    """Say what the child is doing now (on stderr, which the server reads when it has to stop the child)."""
    print(f"explorer-progress: {message}", file=sys.stderr, flush=True)


def parse_sizes(text: str) -> dict[str, int]:
    """`n=1024, batch=8` (commas, spaces or new lines between) as a dict; ValueError for anything else."""
    sizes = {}
    for item in text.replace(",", " ").split():
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier() or not value.lstrip("-").isdigit():
            raise ValueError(f"sizes: {item!r} is not name=integer (write them as: n=1024, batch=8)")
        sizes[name] = int(value)
    return sizes


def program_values(namespace: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The script modules and the graphs among a program's names."""
    modules = {k: v for k, v in namespace.items() if isinstance(v, ScriptModule) and v.ir_module().functions}
    flow_graphs = sys.modules.get("stdlib_ops.graph.flow_graph")  # a program with graphs has imported it
    graphs = {k: v for k, v in namespace.items() if flow_graphs and isinstance(v, flow_graphs.FlowGraph)}
    return modules, graphs


def _mappings_in(module: Any) -> dict[str, Any]:
    found = {}
    for function in module.ir_module().functions:
        for loop in collect(function.body, ForMappingStmt):
            found[f"{function.name}: loop"] = loop.mapping
    return found


def compile_job(workspace: Workspace, job: dict[str, Any]) -> dict[str, Any]:
    """Compile everything the program defines; the stages, pictures and graphs as the page shows them."""
    progress("running the program")
    namespace = workspace.execute(job["program"], workspace.program)
    modules, graphs = program_values(namespace)
    built_modules, built_graphs, line_maps = [], [], {}
    values = dict(namespace)
    for name, module in modules.items():
        progress(f"building {name}")
        values.update(_mappings_in(module))
        built = module.build(module_target(module, job.get("arch", "")), check=job.get("check", False))
        built_modules.append(module_stages(name, built, workspace))
        ir = module.ir_module()
        line_maps[dump_folder(ir)] = step_lines(ir, built.ir.target, PROGRAM_FILE)
    for name, graph in graphs.items():
        progress(f"building the graph {name}")
        built_graphs.append(graph_stages(name, graph, graph.build(Target.of(job.get("target", "cpu")))))
    if not modules and not graphs:
        raise ValueError("the program defines no script module (`with hidet.script_module() as module:`) and no "
                         "graph (`graph = ops.optimize(ops.trace_from(...))`) to compile")
    return {"ir": workspace_dumps(workspace, line_maps), "modules": built_modules, "graphs": built_graphs,
            "pictures": [p.as_json() for p in pictures_of(values)]}


def median_seconds(fn: Any) -> float:
    """The median time of `fn()` over calls made for about TIMING_BUDGET_S (after one warm-up call)."""
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < TIMING_BUDGET_S and len(times) < 100):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def random_array(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Random data of `dtype`: normal floats, small integers, random bools."""
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    low = 0 if dtype.kind == "u" else -8
    return rng.integers(low, 9, shape).astype(dtype)


def kernel_arguments(function: Any, sizes: dict[str, int], rng: np.random.Generator) -> list[Any]:
    """Arguments for a host-callable function: integer parameters from `sizes` (by name), random floats and
    arrays of the shapes its parameters declare."""
    env: dict[Any, Any] = {}
    args: list[Any] = []
    for param in function.params:
        kind = param.type
        if isinstance(kind, DataType) and kind.is_integer:
            if param.name not in sizes:
                raise ValueError(f"type a value for the size parameter {param.name!r} of {function.name} in the "
                                 f"sizes box (for example {param.name}=64)")
            value = sizes[param.name]
        elif isinstance(kind, DataType):
            value = True if kind.is_bool else float(rng.standard_normal())
        elif isinstance(kind, TensorType):
            shape = tuple(e if isinstance(e, int) else int(evaluate(e, env)) for e in kind.shape)
            value = random_array(shape, numpy_dtype(kind.dtype), rng)
        else:
            raise TypeError(f"the explorer runs functions whose parameters are integers, floats and tensors; "
                            f"{param.name!r} of {function.name} is a {kind}")
        env[param] = value
        args.append(value)
    return args


def _reference(workspace: Workspace, job: dict[str, Any], namespace: dict[str, Any]) -> Any:
    progress("running the reference")
    names = workspace.execute(job.get("reference", ""), workspace.reference,
                              {k: v for k, v in namespace.items() if not k.startswith("__")})
    if not callable(names.get("reference")):
        raise ValueError("the reference box defines no function `reference` (def reference(...): in numpy)")
    return names["reference"]


@dataclass(frozen=True)
class Checked:
    """A graph or module that ran and matched the reference: what ran, on which target (and whether on the CUDA
    emulator: `target.emulated`), its arguments (as given, and as the page describes them), the verdict, and a
    call of it for timing."""

    ran: str
    target: Target
    arguments: list[Any]
    described: list[dict[str, Any]]
    verdict: Verdict
    call: Callable[[], Any]


def _tolerances(job: dict[str, Any], terms: int) -> Callable[[np.dtype], Tolerance]:
    return lambda dtype: chosen_tolerance(dtype, terms, job.get("rtol"), job.get("atol"))


def _verdict(compared: list[Compared], job: dict[str, Any], terms: int) -> Verdict:
    """The verdict on `compared`; an AssertionError saying it when they differ."""
    verdict = judge(compared, _tolerances(job, terms))
    if not verdict.ok:
        raise AssertionError(verdict.text)
    return verdict


def _check_graph(name: str, graph: Any, job: dict[str, Any], sizes: dict[str, int], reference: Any,
                 rng: np.random.Generator) -> Checked:
    progress(f"building the graph {name}")
    compiled = graph.build(Target.of(job.get("target", "cpu")))
    inputs = []
    for t in graph.inputs:
        missing = [d for d in t.shape if isinstance(d, str) and d not in sizes]
        if missing:
            raise ValueError(f"type a value for the graph's dimension {missing[0]!r} in the sizes box")
        shape = tuple(sizes[d] if isinstance(d, str) else int(d) for d in t.shape)
        inputs.append(random_array(shape, np.dtype(str(t.dtype)), rng))
    progress(f"running the graph {name}")
    got, want = compiled(*inputs), reference(*[x.copy() for x in inputs])
    got = got if isinstance(got, list | tuple) else [got]
    want = want if isinstance(want, list | tuple) else [want]
    if len(got) != len(want):
        raise AssertionError(f"the graph has {len(got)} output(s), the reference returned {len(want)}")
    compared = [Compared(f"output{k}", np.asarray(g), np.asarray(w)) for k, (g, w) in enumerate(zip(got, want))]
    verdict = _verdict(compared, job, graph_terms(graph, sizes))
    described = [{"name": f"input {k}", "shape": list(x.shape), "dtype": str(x.dtype)} for k, x in enumerate(inputs)]
    return Checked(f"graph {name}", compiled.target, inputs, described, verdict, lambda: compiled(*inputs))


def _check_module(name: str, module: Any, job: dict[str, Any], sizes: dict[str, int], reference: Any,
                  rng: np.random.Generator) -> Checked:
    progress(f"building {name}")
    built = module.build(module_target(module, job.get("arch", "")), check=job.get("check", False))
    signature = built.interface.signatures[0]
    args = kernel_arguments(signature, sizes, rng)
    function = built[signature.name]
    progress(f"running {signature.name} (line {_line_of(signature)})")
    mine = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    theirs = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    function(*mine)
    progress("running the reference")
    reference(*theirs)
    compared = [Compared(p.name, np.asarray(g), np.asarray(w))
                for p, a, g, w in zip(signature.params, args, mine, theirs) if isinstance(a, np.ndarray)]
    verdict = _verdict(compared, job, kernel_terms(module.ir_module().functions, sizes))
    described = [{"name": p.name, "shape": list(a.shape), "dtype": str(a.dtype)} if isinstance(a, np.ndarray)
                 else {"name": p.name, "value": a} for p, a in zip(signature.params, args)]
    # looked up at each call: inside a profile, the module's profile build answers
    return Checked(signature.name, built.target, args, described, verdict, lambda: built[signature.name](*args))


def run_job(workspace: Workspace, job: dict[str, Any]) -> dict[str, Any]:
    """Run the program's first graph, else its first script module, on random inputs; check and time it."""
    progress("running the program")
    namespace = workspace.execute(job["program"], workspace.program)
    modules, graphs = program_values(namespace)
    sizes = parse_sizes(job.get("sizes", ""))
    rng = np.random.default_rng(job.get("seed", 0))
    reference = _reference(workspace, job, namespace)
    if graphs:
        checked = _check_graph(*next(iter(graphs.items())), job, sizes, reference, rng)
    elif modules:
        checked = _check_module(*next(iter(modules.items())), job, sizes, reference, rng)
    else:
        raise ValueError("the program defines no script module and no graph to run")
    progress(f"timing {checked.ran}")
    kernel_s = median_seconds(checked.call)
    progress("timing the reference")
    reference_args = [np.copy(a) if isinstance(a, np.ndarray) else a for a in checked.arguments]
    numpy_s = median_seconds(lambda: reference(*reference_args))
    result = {"ran": checked.ran, "target": str(checked.target), "emulated": checked.target.emulated,
              "inputs": checked.described, "check": checked.verdict.text, "verdict": checked.verdict.as_json(),
              "kernel_ms": kernel_s * 1e3, "numpy_ms": numpy_s * 1e3, "speedup": numpy_s / kernel_s}
    if checked.target.is_cuda and checked.target.emulated:
        progress(f"profiling {checked.ran} on the CUDA emulator")
        result["profile"] = profiled_call(checked.call, workspace)
    return result


def _line_of(function: Any) -> int:
    return function.span.line if function.span is not None else 0
