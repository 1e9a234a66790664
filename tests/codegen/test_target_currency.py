"""A `Target` is the only target value past the public entry points: built modules and compiled graphs hold the
target they were built for as a `Target` (completed for this process: a CUDA one names its architecture and says
whether the CUDA emulator runs it), a saved graph reads its target back (a file of the format before, which wrote
targets as their spellings, too), and no function of the three packages but the entry points takes a target
spelled as a string."""

from __future__ import annotations

import ast
import json
import zipfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import hidet_lang as hidet
import stdlib_ops as ops
from codegen import build_module, resolve_target
from codegen.runtime import backend
from hidet_lang import attrs, f32
from hidet_lang.cuda import threadIdx
from hidet_lang.target import Target, TargetKind
from stdlib_ops.graph.save import SavedGraphError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("hidet_lang", "codegen", "stdlib_ops")

ENTRY_POINTS = frozenset({
    "hidet_lang/target.py:Target.of",
    "hidet_lang/frontend/jit.py:jit",
    "hidet_lang/frontend/script.py:ScriptFunction.build",
    "hidet_lang/frontend/script.py:ScriptModule.build",
    "hidet_lang/ir/func.py:IRModule.build",
    "hidet_lang/ir/module.py:IRModule.build",
    "codegen/build.py:build_module",
    "stdlib_ops/graph/build.py:build_graph",
    "stdlib_ops/graph/flow_graph.py:FlowGraph.build",
    "stdlib_ops/tuning/tune.py:tune",
    "stdlib_ops/tuning/bundle.py:build_bundle",
    "stdlib_ops/tuning/machine.py:machine_id",  # a public query: `machine_id('cuda')` names a machine's records
    # the users' decorator, `register_template('matmul', 'cuda')` (the library's own registrations take a `Target`)
    "stdlib_ops/templates/registry.py:TemplateRegistry.register",
})
"""The functions that take a target's spelling ('cpu', 'cuda', 'cuda:sm_90a') and read it once with `Target.of`."""


with hidet.script_module() as CPU_MODULE:
    @hidet.script
    def double(a: f32[8], b: f32[8]):
        attrs.func_kind = "public"
        for i in range(8):
            b[i] = a[i] * 2.0

with hidet.script_module() as CUDA_MODULE:
    @hidet.script
    def fill(a: f32[32]):
        attrs.cuda.grid_dim = 1
        attrs.cuda.block_dim = 32
        a[threadIdx.x] = f32(threadIdx.x)


def emulated_here() -> bool:
    """Whether CUDA modules run on the CUDA emulator in this process."""
    return backend() == "emulator"


def test_a_cpu_module_holds_its_target() -> None:
    built = build_module(CPU_MODULE.ir_module(), "cpu")
    assert built.target == Target(TargetKind.CPU) and not built.on_gpu
    assert CPU_MODULE.build().target == Target(TargetKind.CPU)


@pytest.mark.parametrize("spelled", ["cuda", "cuda:sm_80", "cuda:sm_90a"])
def test_a_cuda_module_holds_its_resolved_target(spelled: str) -> None:
    built = build_module(CUDA_MODULE.ir_module(), spelled)
    assert isinstance(built.target, Target) and built.target == resolve_target(Target.of(spelled))
    assert built.target.is_cuda and built.target.arch is not None and built.target.emulated == emulated_here()
    assert built.on_gpu is not built.target.emulated
    a = np.zeros(32, np.float32)
    built(a)
    np.testing.assert_array_equal(a, np.arange(32, dtype=np.float32))


def test_resolving_completes_cuda_targets_only() -> None:
    cuda = resolve_target(Target.of("cuda:sm_86"))
    assert (cuda.arch, cuda.emulated) == ("sm_86", emulated_here()) and resolve_target(cuda) == cuda
    assert resolve_target(Target.of("cuda")).arch is not None
    assert resolve_target(Target.of("cpu")) == Target(TargetKind.CPU)


def test_shared_memory_per_block_is_the_architectures() -> None:
    assert Target.of("cuda:sm_80").shared_memory_per_block == 163 * 1024
    assert Target.of("cuda:sm_90a").shared_memory_per_block == 227 * 1024
    with pytest.raises(ValueError, match="no CUDA architecture"):
        _ = Target.of("cuda").shared_memory_per_block


@cache
def compiled(spelled: str) -> ops.CompiledGraph:
    """A two-kernel graph built for `spelled`."""
    xs = ops.symbol([4, 8])
    return ops.trace_from(ops.softmax(ops.relu(xs) * 2.0, axis=-1), [xs]).build(spelled)


@pytest.mark.parametrize("spelled", ["cpu", "cuda"])
def test_a_compiled_graph_holds_its_resolved_target(spelled: str) -> None:
    graph = compiled(spelled)
    assert isinstance(graph.target, Target) and graph.target == resolve_target(Target.of(spelled))
    assert graph.device == graph.target.device
    assert all(module.target.emulated == graph.target.emulated for module in graph.modules)


def graph_header(path: Path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("graph.json"))


def rewrite_header(path: Path, change: object) -> Path:
    """A copy of the saved graph at `path` with its `graph.json` changed in place by `change(header)`."""
    other = path.with_name("other_" + path.name)
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(other, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "graph.json":
                header = json.loads(data)
                change(header)  # type: ignore[operator]
                data = json.dumps(header).encode()
            target.writestr(item, data)
    return other


@pytest.mark.parametrize("spelled", ["cpu", "cuda"])
def test_save_and_load_round_trip_the_target(spelled: str, tmp_path: Path) -> None:
    graph = compiled(spelled)
    path = tmp_path / "graph.hlgraph"
    graph.save(str(path))
    assert graph_header(path)["target"] == {"target": str(graph.target), "emulated": graph.target.emulated,
                                            "cpu_features": None}
    loaded = ops.load(str(path))
    assert loaded.target == graph.target
    assert [m.target for m in loaded.modules] == [m.target for m in graph.modules]
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(loaded(x).numpy(), graph(x).numpy())


@pytest.mark.parametrize("spelled", ["cpu", "cuda"])
def test_a_graph_saved_with_targets_as_spellings_loads(spelled: str, tmp_path: Path) -> None:
    """Format 2 wrote each target as its spelling, and where CUDA kernels ran ('cpu', 'gpu', 'emulator') beside."""
    graph = compiled(spelled)
    path = tmp_path / "graph.hlgraph"
    graph.save(str(path))

    def format_2(header: dict) -> None:
        ran = "cpu" if not graph.target.is_cuda else "emulator" if graph.target.emulated else "gpu"
        header.update(format_version=2, target=header["target"]["target"], backend=ran)
        for kernel in header["kernels"]:
            kernel["target"] = kernel["target"]["target"]

    loaded = ops.load(str(rewrite_header(path, format_2)))
    assert loaded.target == graph.target
    assert [m.target for m in loaded.modules] == [m.target for m in graph.modules]


def test_a_damaged_target_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "graph.hlgraph"
    compiled("cpu").save(str(path))
    other = rewrite_header(path, lambda header: header["target"].update(emulated="no"))
    with pytest.raises(SavedGraphError, match="emulated"):
        ops.load(str(other))


def string_target_functions() -> set[str]:
    """`file:Qualified.name` of every function of the packages with a parameter `target` whose annotation admits a
    `str`."""
    found: set[str] = set()

    def visit(node: ast.AST, path: Path, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, path, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                params = [*child.args.posonlyargs, *child.args.args, *child.args.kwonlyargs]
                if any(p.arg == "target" and p.annotation is not None and _admits_str(p.annotation) for p in params):
                    found.add(f"{path.relative_to(ROOT).as_posix()}:{prefix}{child.name}")
                visit(child, path, f"{prefix}{child.name}.")

    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            visit(ast.parse(path.read_text(encoding="utf-8")), path, "")
    return found


def _admits_str(annotation: ast.expr) -> bool:
    """Whether the annotation is `str` or a union (`a | b`) with `str` among its members."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _admits_str(annotation.left) or _admits_str(annotation.right)
    return isinstance(annotation, ast.Name) and annotation.id == "str"


def test_the_tree_is_read() -> None:
    assert "codegen/build.py:build_module" in string_target_functions()


def test_only_the_entry_points_take_a_target_spelled_as_a_string() -> None:
    found = string_target_functions()
    unexpected = sorted(found - ENTRY_POINTS)
    assert not unexpected, ("past the entry points a target is a `Target` (annotate the parameter `target: Target`; "
                            f"an entry point reads a spelling once with `Target.of`): {', '.join(unexpected)}")
    stale = sorted(ENTRY_POINTS - found)
    assert not stale, f"these take no string target any more; take them off this test's lists: {', '.join(stale)}"
