"""Generated sources name the user's files by tokens (codegen.toolchain.source_files), never by their paths: the same
program in two directories builds one cache entry per library and cubin, and each copy's messages (assertions,
checks, emulator and launch errors, compile errors mapped to the DSL line) and shown source still name its own
file and line."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from codegen.emit.c_emitter import CEmitter
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.toolchain import cache
from codegen.toolchain.cache_entries import CUBIN, LIBRARY
from codegen.toolchain.compiler import Diagnostic, format_diagnostics, map_c_line_to_dsl
from codegen.toolchain.source_files import SourceFiles, files_in_effect
from hidet_lang.passes.pipeline import VERIFY_ENV_VAR, lower

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''
import importlib.util
import json
import os
import sys
import warnings

import numpy as np

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32
from hidet_lang.cuda import threadIdx

with hidet.script_module() as cpu_module:

    @hidet.script
    def checked_index(x: i32[5], k: i32, out: i32[1]):
        attrs.func_kind = "public"
        assert k < 5, "k is out of range"  # MARK: assert
        out[0] = x[k]

    @hidet.script
    def read_at(x: i32[5], k: i32, out: i32[1]):
        attrs.func_kind = "public"
        out[0] = x[k]  # MARK: read

    @hidet.script
    def fill(out: f32[64]):
        attrs.func_kind = "public"
        for i in range(64):  # MARK: loop
            out[i] = f32(i) * 2.0

with hidet.script_module() as gpu_module:

    @hidet.script
    def store_past(a: f32[32]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 33
        attrs.cuda.grid_dim = 1
        a[threadIdx.x] = 1.0  # MARK: store

    @hidet.script
    def sized(n: i32, a: f32[n]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = (n + 31) // 32  # MARK: grid
        if threadIdx.x < n:
            a[threadIdx.x] = 1.0

with hidet.script_module() as broken_module:

    @hidet.script
    def broken(out: f32[1]):
        attrs.func_kind = "public"
        unused = f32(1.0)  # MARK: broken
        out[0] = 2.0


def message(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    return "no error"


x, out = np.arange(5, dtype=np.int32), np.zeros(1, np.int32)
cpu, checked = cpu_module.build(), cpu_module.build(check=True)
gpu = gpu_module.build()
found = {
    "assert": message(lambda: cpu["checked_index"](x, 7, out)),
    "bounds": message(lambda: checked["read_at"](x, 9, out)),
    "store": message(lambda: gpu["store_past"](np.zeros(32, np.float32))),
    "launch": message(lambda: gpu["sized"](0, np.zeros(0, np.float32))),
    "source": cpu.source(),
    "compiled": cpu.compiled_source(),
    "gpu_source": gpu.source(),
    "gpu_compiled": gpu.compiled_source() + gpu.compiled_source("host"),
    "report": [[loop.file, loop.line] for loop in cpu.report()],
}
os.environ["CC"] = os.environ.get("CC", "cc") + " -Werror=unused-variable"  # a compiler that rejects one statement
try:
    broken_module.build()
    found["c_error"] = "no error"
except Exception as exc:  # noqa: BLE001
    found["c_error"] = f"{type(exc).__name__}: {exc}"
    found["c_error_at"] = [getattr(exc, "dsl_file", None), getattr(exc, "dsl_line", None)]
print(json.dumps(found))
'''

LINES = textwrap.dedent(PROGRAM).splitlines()


def line_of(marker: str) -> int:
    return next(i for i, text in enumerate(LINES, 1) if f"# MARK: {marker}" in text)


def entries(root: Path) -> set[str]:
    """The libraries and cubins of the cache at `root` (module records, keyed by the IR, are left out)."""
    return {p.parent.name for artifact in (LIBRARY, CUBIN) for p in root.glob(f"*/*/{artifact.file}")}


def run_copy(directory: Path, cache_root: Path) -> dict:
    """Write the program into `directory`, run it there in a process of its own; what it found."""
    directory.mkdir(parents=True)
    program = directory / "prog.py"
    program.write_text(textwrap.dedent(PROGRAM))
    env = {**os.environ, cache.CACHE_ENV_VAR: str(cache_root), "PYTHONPATH": str(REPO), "HIDET_LANG_CUDA": "emulator"}
    env.pop(VERIFY_ENV_VAR, None)
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, env=env, cwd=directory,
                          check=False, timeout=900)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_same_program_in_two_directories_compiles_once_and_names_its_own_file(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    first = run_copy(tmp_path / "one" / "project", root)
    built = entries(root)
    second = run_copy(tmp_path / "two" / "elsewhere", root)
    assert built and entries(root) == built, "the second copy compiled a library or cubin again"
    for found, directory in ((first, tmp_path / "one" / "project"), (second, tmp_path / "two" / "elsewhere")):
        program = str(directory / "prog.py")
        for source in (found["compiled"], found["gpu_compiled"]):
            assert str(tmp_path) not in source and "prog.py" not in source
            assert "// <file 0>:" in source
        assert f"// {program}:{line_of('read')}" in found["source"]
        assert f"// {program}:{line_of('store')}" in found["gpu_source"]
        assert found["assert"] == f"AssertionError: {program}:{line_of('assert')}: k is out of range"
        assert found["bounds"].startswith(f"IndexError: {program}:{line_of('read')}: index 9 ")
        assert found["store"].startswith("RuntimeError: ") and f"{program}:{line_of('store')}" in found["store"]
        assert found["launch"].startswith(f"RuntimeError: {program}:{line_of('grid')}: kernel 'sized': grid_dim (0, ")
        assert [program, line_of("loop")] in found["report"]
        assert found["c_error"].startswith("CCompilationError: ")
        assert f"\n{program}:{line_of('broken')}: error: " in found["c_error"]
        assert "unused = f32(1.0)" in found["c_error"]  # the DSL line's text, read from the user's file
        assert "<file " not in found["c_error"]
        assert found["c_error_at"] == [program, line_of("broken")]
    for source in [*root.glob("*/*/lib.c*"), *root.glob("*/*/kernel.cu")]:  # what each entry was compiled from
        assert str(tmp_path) not in source.read_text()


def test_files_are_numbered_in_order_of_first_appearance() -> None:
    files = SourceFiles()
    assert [files.token(p) for p in ("/a/k.py", "/b/k.py", "/a/k.py")] == ["<file 0>", "<file 1>", "<file 0>"]
    assert files.paths == ("/a/k.py", "/b/k.py") and SourceFiles(files.paths) == files
    assert files.resolve("<file 1>:3: x <file 0>:4 <file 7>") == "/b/k.py:3: x /a/k.py:4 <file 7>"
    assert files.path("<string>") == "<string>" and files.path("<file 1>") == "/b/k.py"


def load_copy(directory: Path, name: str) -> ModuleType:
    """The program written into `directory` and imported from there (as module `name`), without running it."""
    directory.mkdir(parents=True)
    path = directory / "prog.py"
    path.write_text(textwrap.dedent(PROGRAM).split("\ndef message(call):")[0])
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_same_program_in_another_file_gives_the_same_sources(tmp_path: Path) -> None:
    one, two = (load_copy(tmp_path / d, f"path_free_copy_{d}") for d in ("one", "two"))
    emitted: list[tuple[str, ...]] = []
    for copy in (one, two):
        cpu = CEmitter(check=True)
        plan = plan_module(lower(copy.gpu_module.ir_module()))
        files = SourceFiles()
        sources = (cpu.emit_module(lower(copy.cpu_module.ir_module())), *emit_cuda(plan, files=files),
                   *emit_cuda(plan, emulator=True, check=True, files=files))
        assert cpu.files.paths == files.paths == (str(tmp_path / copy.__name__.rsplit("_", 1)[1] / "prog.py"),)
        emitted.append(sources)
    assert emitted[0] == emitted[1]
    assert not any(str(tmp_path) in text for text in emitted[0])


def test_compile_diagnostics_name_the_file_of_the_table_in_effect() -> None:
    source = "#include <x.h>\n// <file 0>:12\nint f() {\n    retrun 1;  // <file 0>:13\n}\n"
    diagnostic = Diagnostic(file="lib.c", line=4, message="'retrun' undeclared", in_generated=True)
    assert map_c_line_to_dsl(source, 4) == ("<file 0>", 13)
    files = SourceFiles(["/home/u/k.py"])
    with files.in_effect():
        assert files_in_effect() is files
        body, first = format_diagnostics(source, [diagnostic], "")
    assert first == ("/home/u/k.py", 13) and body.startswith("/home/u/k.py:13: error: 'retrun' undeclared")
    assert "<file 0>" not in body
    assert files_in_effect().paths == ()
    assert map_c_line_to_dsl(source, 3, files) == ("/home/u/k.py", 12)


@pytest.mark.parametrize("which", [None, "c"])
def test_a_cpu_module_shows_its_source_with_the_paths(which: str | None) -> None:
    import numpy as np

    import hidet_lang as hidet
    from hidet_lang import f32

    @hidet.script
    def halve(a: f32[4], b: f32[4]):
        hidet.attrs.func_kind = "public"
        for i in range(4):
            b[i] = a[i] / 2.0

    built = halve.build()
    a, b = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    built(a, b)
    np.testing.assert_array_equal(b, a / 2)
    assert f"// {__file__}:" in built.source(which)
    assert __file__ not in built.compiled_source(which) and "// <file 0>:" in built.compiled_source(which)
