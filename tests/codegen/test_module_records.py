"""A module built before is loaded from its record (codegen.module_records): nothing is lowered, emitted or
compiled, and the loaded module behaves as the built one (results, argument checks, assertions, its lowered IR).
Anything that could change what a build produces builds again."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import codegen.backends
import codegen.build
import codegen.module_records
import hidet_lang as hidet
from codegen.build import build_module
from codegen.module_records import RECORD
from codegen.toolchain import cache
from hidet_lang.cpu import f32x4_load, f32x4_store
from hidet_lang.ir.func import IRModule
from hidet_lang.passes.pipeline import DUMP_ENV_VAR, VERIFY_ENV_VAR
from hidet_lang.types import f32, i32

REPO = Path(__file__).resolve().parents[2]


@hidet.script
def scale_rows(x: f32[4, 6], factor: f32, out: f32[4, 6]):
    hidet.attrs.func_kind = "public"
    for i in range(4):
        for j in range(6):
            out[i, j] = x[i, j] * factor + i


@hidet.script
def checked_index(x: i32[5], k: i32, out: i32[1]):
    hidet.attrs.func_kind = "public"
    assert k < 5, "k is out of range"
    out[0] = x[k]


def _ir(function: hidet.ScriptFunction) -> IRModule:
    return IRModule((function.ir,))


@pytest.fixture(autouse=True, scope="module")
def lowering_not_observed() -> Iterator[None]:
    """The suite verifies every lowering (tests/conftest.py), which builds without records: not here."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(VERIFY_ENV_VAR, raising=False)
        yield


def count_lowerings(monkeypatch: pytest.MonkeyPatch) -> list[IRModule]:
    """From now on, count the modules the builds lower (they are lowered as before), and those a loaded module
    lowers for its `ir`."""
    asked: list[IRModule] = []
    real_lower = codegen.build.lower

    def counting(module: IRModule, *args: object, **kwargs: object) -> IRModule:
        asked.append(module)
        return real_lower(module, *args, **kwargs)

    monkeypatch.setattr(codegen.build, "lower", counting)
    monkeypatch.setattr(codegen.backends, "lower", counting)
    return asked


def _records(root: Path) -> list[Path]:
    return sorted(root.glob(f"*/*/{RECORD.file}"))


def _built_then_forgotten(module: IRModule, **options: bool):
    """`module` built (and recorded), with the cache's memory layer emptied after, as in a new process."""
    built = build_module(module, **options)
    cache.clear_memory_cache()
    return built


@settings(max_examples=5, deadline=None)
@given(factor=st.floats(-4, 4, width=32), seed=st.integers(0, 2**32 - 1))
def test_a_recorded_module_computes_as_the_built_one(factor: float, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((4, 6)).astype(np.float32)
    expected = x * np.float32(factor) + np.arange(4, dtype=np.float32)[:, None]
    for module in (_built_then_forgotten(_ir(scale_rows)), build_module(_ir(scale_rows))):
        out = np.empty_like(x)
        module(x, factor, out)
        np.testing.assert_array_equal(out, expected)


def test_the_second_build_lowers_nothing(cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = _built_then_forgotten(_ir(scale_rows))
    assert len(_records(cache_root)) == 1
    lowered_by_the_build = str(built.ir)
    lowered = count_lowerings(monkeypatch)
    loaded = build_module(_ir(scale_rows))
    assert lowered == []
    assert loaded.library_path == built.library_path
    assert loaded.source() == built.source()
    assert loaded.param_names == ("x", "factor", "out")
    assert str(loaded.ir) == lowered_by_the_build  # lowered on demand, as the build lowered it
    assert len(lowered) == 1


def test_a_recorded_module_keeps_its_argument_checks_and_assertions(cache_root: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _built_then_forgotten(_ir(checked_index))
    lowered = count_lowerings(monkeypatch)
    loaded = build_module(_ir(checked_index))
    x = np.arange(10, 15, dtype=np.int32)
    out = np.zeros(1, np.int32)
    loaded(x, 3, out)
    assert out[0] == 13
    with pytest.raises(AssertionError, match="k is out of range"):
        loaded(x, 7, out)
    readonly = np.zeros(1, np.int32)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="'out'"):  # a read-only array for the parameter it writes
        loaded(x, 1, readonly)
    x.flags.writeable = False  # the one it only reads takes a read-only array
    loaded(x, 1, out)
    assert out[0] == 11
    with pytest.raises(TypeError, match="'x'"):
        loaded(x.astype(np.float32), 1, out)
    assert lowered == []


@hidet.script
def doubled_lanes(x: f32[4], out: f32[4]):
    hidet.attrs.func_kind = "public"
    v = f32x4_load(~x[0])
    f32x4_store(~out[0], v + v)


def test_a_recorded_module_keeps_the_target_its_build_completed(cache_root: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    built = _built_then_forgotten(_ir(doubled_lanes))
    assert built.target.cpu_features is not None and "sse" in built.target.cpu_features  # a module with vectors
    lowered = count_lowerings(monkeypatch)
    loaded = build_module(_ir(doubled_lanes))
    assert lowered == [] and loaded.target == built.target  # from the record: no walk of the IR for vectors
    out = np.empty(4, np.float32)
    loaded(np.arange(4, dtype=np.float32), out)
    np.testing.assert_array_equal(out, [0, 2, 4, 6])
    assert build_module(_ir(scale_rows)).target == hidet.target.Target.of("cpu")  # none where it has none


@pytest.mark.parametrize("change", ["project code", "machine", "options", "verify", "dump", "library gone",
                                    "record damaged"])
def test_what_could_change_the_build_builds_again(change: str, cache_root: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    built = _built_then_forgotten(_ir(scale_rows))
    options = {}
    if change == "project code":
        monkeypatch.setattr(codegen.module_records, "project_code_identity", lambda: "an edited pass")
    elif change == "machine":
        backend = type(codegen.build.backend_for(hidet.target.Target.of("cpu")))
        monkeypatch.setattr(backend, "machine", lambda self, target: "another compiler")
    elif change == "options":
        options = {"check": True}
    elif change == "verify":
        monkeypatch.setenv(VERIFY_ENV_VAR, "1")
    elif change == "dump":
        monkeypatch.setenv(DUMP_ENV_VAR, str(cache_root.parent / "dumps"))
    elif change == "library gone":
        cache.default_cache._forget(Path(built.library_path))
        os.rename(Path(built.library_path).parent, cache_root.parent / "moved")
    else:
        record = _records(cache_root)[0]
        record.chmod(0o600)
        record.write_bytes(record.read_bytes()[:-8] + b"damaged!")
    lowered = count_lowerings(monkeypatch)
    again = build_module(_ir(scale_rows), **options)
    assert len(lowered) == 1
    x = np.ones((4, 6), np.float32)
    out = np.empty_like(x)
    again(x, 2.0, out)
    np.testing.assert_array_equal(out, 2 + np.arange(4, dtype=np.float32)[:, None] + np.zeros((4, 6), np.float32))


CHILD = """
import sys
import numpy as np
import hidet_lang as hidet
from hidet_lang.types import f32
import codegen.backends
import codegen.build
import codegen.module_records

if sys.argv[1] == "forbid":
    def refuse(*args, **kwargs):
        raise SystemExit("lowered a module built before")
    codegen.build.lower = refuse


@hidet.script
def add_one(x: f32[8], out: f32[8]):
    hidet.attrs.func_kind = "public"
    for i in range(8):
        out[i] = x[i] + 1.0


out = np.zeros(8, np.float32)
add_one.build()(np.arange(8, dtype=np.float32), out)
print(out.tolist())
"""


def test_a_new_process_loads_the_record_of_an_earlier_one(tmp_path: Path) -> None:
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(CHILD))
    env = {**os.environ, cache.CACHE_ENV_VAR: str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    env.pop(VERIFY_ENV_VAR, None)
    runs = [subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, env=env, check=False)
            for mode in ("build", "forbid")]
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == str([float(k + 1) for k in range(8)])
