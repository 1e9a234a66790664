"""`build_module` builds through the backend of the target's kind (`codegen.backends`): the backend completes the
target, the module is lowered for it, and the backend builds the lowered module. A CUDA build for an architecture
with features of its own (`cuda:sm_90a`) runs on the emulator where there is no GPU."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import hidet_lang as hidet
from codegen import backends
from codegen.build import build_module
from codegen.runtime.module import CompiledModule
from codegen.toolchain import cache, compiler
from hidet_lang import attrs, f32
from hidet_lang.cuda import threadIdx
from hidet_lang.ir.func import IRModule
from hidet_lang.target import Target, TargetKind

with hidet.script_module() as CPU_MODULE:
    @hidet.script
    def double(a: f32[8], b: f32[8]):
        attrs.func_kind = "public"
        for i in range(8):
            b[i] = a[i] * 2.0

with hidet.script_module() as CUDA_MODULE:
    @hidet.script
    def fill(a: f32[64]):
        attrs.cuda.grid_dim = 2
        attrs.cuda.block_dim = 32
        a[threadIdx.x + 32 * hidet.cuda.blockIdx.x] = f32(threadIdx.x)


class RecordingBackend(backends.CpuBackend):
    """The CPU backend, recording what `build_module` asks of it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def resolve(self, target: Target, module: IRModule) -> Target:
        self.calls.append(("resolve", target))
        return super().resolve(target, module)

    def build(self, lowered: IRModule, target: Target, *, check: bool, fast_math: bool) -> CompiledModule:
        self.calls.append(("build", (target, check, fast_math, [f.name for f in lowered.functions])))
        return super().build(lowered, target, check=check, fast_math=fast_math)


def test_a_build_goes_through_the_backend_of_its_target(monkeypatch: pytest.MonkeyPatch) -> None:
    recording = RecordingBackend()
    monkeypatch.setitem(backends.BACKENDS, TargetKind.CPU, recording)
    module = build_module(CPU_MODULE.ir_module(), "cpu", check=True)
    a = np.arange(8, dtype=np.float32)
    b = np.zeros(8, np.float32)
    module(a, b)
    np.testing.assert_array_equal(b, a * 2)
    assert recording.calls == [("resolve", Target(TargetKind.CPU)),
                               ("build", (Target(TargetKind.CPU), True, False, ["double"]))]
    assert module.target == Target(TargetKind.CPU)


@pytest.mark.parametrize("target", ["cuda:sm_80", "cuda:sm_90a", Target.of("cuda:sm_90a")])
def test_an_architecture_specific_build_runs(target: str | Target) -> None:
    """On the emulator where there is no GPU (and on a GPU of that architecture where there is one)."""
    module = build_module(CUDA_MODULE.ir_module(), target)
    assert str(module.target) == str(Target.of(target)) and module.target.emulated is not module.on_gpu
    a = np.full(64, np.nan, np.float32)
    module(a)
    np.testing.assert_array_equal(a, np.tile(np.arange(32, dtype=np.float32), 2))


def test_a_module_exports_its_cache_entries_and_loads_from_them_without_compiling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`CompiledModule.export()` gives the entries a module loads; `CompiledModule.load` installs them in another
    cache and builds the module from its IR there with no compiler run."""
    module = build_module(CPU_MODULE.ir_module(), "cpu")
    entries = module.export()
    assert [e.artifact for e in entries] == ["lib.so"]
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("HIDET_LANG_CACHE_DIR", str(elsewhere))
    cache.clear_memory_cache()
    monkeypatch.setattr(compiler, "run_compiler", _no_compiler)
    try:
        loaded = CompiledModule.load(CPU_MODULE.ir_module(), "cpu", entries, source="the test's module")
    finally:
        cache.clear_memory_cache()
    assert Path(loaded.library_path).is_relative_to(elsewhere.resolve())
    a, b = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    loaded(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_an_entry_of_another_version_is_left_out_with_a_warning(tmp_path: Path) -> None:
    (entry,) = build_module(CPU_MODULE.ir_module(), "cpu").export()
    foreign = dataclasses.replace(entry, meta={**entry.meta, "package_version": "0.0.0"})
    with pytest.warns(RuntimeWarning, match="the test's module is built again from its IR: the entry was built by "
                                            "version 0.0.0 of the package"):
        loaded = CompiledModule.load(CPU_MODULE.ir_module(), "cpu", [foreign], source="the test's module")
    b = np.zeros(8, np.float32)
    loaded(np.ones(8, np.float32), b)
    np.testing.assert_array_equal(b, np.full(8, 2, np.float32))


def _no_compiler(*args: object, **kwargs: object) -> None:
    raise AssertionError("a compiler ran")


def test_codegen_has_a_public_face() -> None:
    import codegen

    for name in codegen.__all__:
        assert getattr(codegen, name) is not None
    for part in ("emit", "toolchain", "runtime"):
        package = __import__(f"codegen.{part}", fromlist=["__all__"])
        assert package.__all__ and all(getattr(package, name) is not None for name in package.__all__)
