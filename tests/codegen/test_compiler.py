"""Tests of the C compiler driver: finding the compiler, building a library, mapping errors to DSL lines."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from codegen.toolchain import compiler
from codegen.toolchain.compiler import (
    DEFAULT_C_FLAGS,
    SEMANTICS_FLAGS,
    CCompilationError,
    CompilerInfo,
    CompilerNotFoundError,
    compile_shared_library,
    compiler_version,
    find_c_compiler,
    map_c_line_to_dsl,
)

ADD_SOURCE = "int add(int a, int b) { return a + b; }\n"


@pytest.fixture
def no_cc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run with neither CC nor CXX set."""
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)


def test_cpu_and_emulator_flags_give_the_dsl_semantics() -> None:
    from codegen.cuda_build import EMULATOR_FLAGS

    assert {"-O3", "-fopenmp", *SEMANTICS_FLAGS, "-fexcess-precision=standard"} <= set(DEFAULT_C_FLAGS)
    assert set(SEMANTICS_FLAGS) <= set(EMULATOR_FLAGS)


def test_find_c_compiler_on_path(no_cc: None) -> None:
    info = find_c_compiler()
    assert isinstance(info, CompilerInfo)
    assert os.path.isfile(info.command[0])
    assert os.path.realpath(info.command[0]) in info.identity
    assert find_c_compiler() is info  # memoized


def test_find_cxx_compiler_on_path(no_cc: None) -> None:
    info = find_c_compiler("c++")
    assert os.path.basename(info.command[0]) in ("c++", "g++", "clang++")


def test_cc_with_arguments_is_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "gcc -O1")
    info = find_c_compiler()
    assert info.command[1:] == ("-O1",)
    assert os.path.basename(info.command[0]) == "gcc"
    assert "-O1" in info.identity


def test_identity_reflects_the_executable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "fakecc"
    fake.write_text('#!/bin/sh\nexec gcc "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    before = find_c_compiler().identity
    os.utime(fake, ns=(1_000_000_000, 1_000_000_000))
    monkeypatch.setenv("CC", f"{fake} ")  # another environment value, so the memo does not answer
    after = find_c_compiler().identity
    assert before != after
    assert str(fake) in after


def test_compiler_not_found_names_cc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "no-such-compiler-hidet-xyz")
    with pytest.raises(CompilerNotFoundError) as info:
        find_c_compiler()
    message = str(info.value)
    assert "CC" in message and "no-such-compiler-hidet-xyz" in message
    assert "export CC=" in message
    assert isinstance(info.value, RuntimeError)


def test_compiler_not_found_lists_names(no_cc: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CompilerNotFoundError, match="cc, gcc, clang") as info:
        find_c_compiler()
    assert "export CC=" in str(info.value)
    with pytest.raises(CompilerNotFoundError, match="export CXX="):
        find_c_compiler("c++")


def test_unknown_language_is_rejected() -> None:
    with pytest.raises(ValueError, match="fortran"):
        find_c_compiler("fortran")


def test_compile_and_call_add(tmp_path: Path, no_cc: None) -> None:
    out = tmp_path / "add.so"
    compile_shared_library(ADD_SOURCE, out, compiler=find_c_compiler(), flags=DEFAULT_C_FLAGS)
    assert out.with_suffix(".c").read_text() == ADD_SOURCE
    lib = ctypes.CDLL(str(out))
    lib.add.argtypes = (ctypes.c_int, ctypes.c_int)
    lib.add.restype = ctypes.c_int
    assert lib.add(2, 40) == 42


def test_compile_cxx(tmp_path: Path, no_cc: None) -> None:
    source = 'extern "C" int twice(int a) { auto f = [](int x) { return 2 * x; }; return f(a); }\n'
    out = tmp_path / "twice.so"
    compile_shared_library(source, out, compiler=find_c_compiler("c++"), flags=("-O1",), language="c++")
    assert out.with_suffix(".cpp").exists()
    assert ctypes.CDLL(str(out)).twice(21) == 42


def test_compiler_version_is_memoized(no_cc: None) -> None:
    info = find_c_compiler()
    version = compiler_version(info)
    assert version and "unknown" not in version
    assert compiler_version(info) is version


def test_map_c_line_to_dsl() -> None:
    source = "\n".join(
        [
            "#include <stdint.h>",  # 1
            "void f(int *a) {",  # 2
            "  // /home/u/kernels/k.py:12",  # 3
            "  a[0] = 1;",  # 4
            "  a[1] = 2;  // /home/u/kernels/k.py:13",  # 5
            "  a[2] = 3;",  # 6
            "  // <string>:4",  # 7
            "}",  # 8
        ]
    )
    assert map_c_line_to_dsl(source, 1) is None
    assert map_c_line_to_dsl(source, 2) is None
    assert map_c_line_to_dsl(source, 3) == ("/home/u/kernels/k.py", 12)
    assert map_c_line_to_dsl(source, 4) == ("/home/u/kernels/k.py", 12)
    assert map_c_line_to_dsl(source, 5) == ("/home/u/kernels/k.py", 13)
    assert map_c_line_to_dsl(source, 6) == ("/home/u/kernels/k.py", 13)
    assert map_c_line_to_dsl(source, 8) == ("<string>", 4)


def test_ordinary_comments_are_not_markers() -> None:
    source = "// TODO: 12\nint x;  // see foo.c:3\nint y;\n// note: 7\nint z;\n"
    assert map_c_line_to_dsl(source, 3) is None
    assert map_c_line_to_dsl(source, 5) is None


def test_own_line_marker_may_name_any_file() -> None:
    source = "int x;\n  // /opt/scripts/run_kernel:41\nint y;\n"
    assert map_c_line_to_dsl(source, 1) is None
    assert map_c_line_to_dsl(source, 3) == ("/opt/scripts/run_kernel", 41)


def _user_file(tmp_path: Path) -> Path:
    """A DSL 'user file' whose line 12 is a known statement."""
    lines = [f"# line {i}" for i in range(1, 21)]
    lines[11] = "    c[i] = a[i] + b[i]"
    path = tmp_path / "file.py"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_syntax_error_maps_to_dsl_line(tmp_path: Path, no_cc: None) -> None:
    user = _user_file(tmp_path)
    source = "\n".join(
        [
            "void kernel(float *a, float *b, float *c, int n) {",  # 1
            f"  // {user}:10",  # 2
            "  for (int i = 0; i < n; i++) {",  # 3
            f"    // {user}:12",  # 4
            "    c[i] = a[i] + b[i]",  # 5: missing ';'
            "  }",  # 6: the compiler reports the error here
            "}",
            "",
        ]
    )
    with pytest.raises(CCompilationError) as info:
        compile_shared_library(source, tmp_path / "k.so", compiler=find_c_compiler(), flags=())
    error = info.value
    message = str(error)
    assert f"{user}:12: error:" in message
    assert "file.py:12" in message
    assert "\n    c[i] = a[i] + b[i]\n" in message  # the DSL line, read through linecache
    assert "generated C (line " in message
    assert error.dsl_file == str(user) and error.dsl_line == 12
    assert "error" in error.compiler_output
    assert isinstance(error, RuntimeError)


def test_error_without_markers_shows_compiler_location(tmp_path: Path, no_cc: None) -> None:
    source = "int f(void) { return undefined_name; }\n"
    with pytest.raises(CCompilationError) as info:
        compile_shared_library(source, tmp_path / "f.so", compiler=find_c_compiler(), flags=())
    message = str(info.value)
    assert "f.c:1: error:" in message and "undefined_name" in message
    assert "generated C (line 1): int f(void)" in message
    assert info.value.dsl_file is None and info.value.dsl_line is None


def test_error_count_is_capped(tmp_path: Path, no_cc: None) -> None:
    body = "\n".join(f"  int v{i} = undefined_{i};" for i in range(15))
    source = f"void f(void) {{\n{body}\n}}\n"
    with pytest.raises(CCompilationError) as info:
        compile_shared_library(source, tmp_path / "f.so", compiler=find_c_compiler(), flags=())
    message = str(info.value)
    assert message.count(": error:") == compiler.MAX_REPORTED_ERRORS
    assert "more errors" in message


def test_compile_timeout_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = tmp_path / "slowcc"
    slow.write_text("#!/bin/sh\nsleep 5\n")
    slow.chmod(0o755)
    monkeypatch.setenv("CC", str(slow))
    monkeypatch.setattr(compiler, "COMPILE_TIMEOUT_S", 0.2)
    with pytest.raises(CCompilationError, match="did not finish"):
        compile_shared_library(ADD_SOURCE, tmp_path / "a.so", compiler=find_c_compiler(), flags=())
