"""Tests of precompiled headers: the emulator's C++ libraries read the primitives header precompiled, and the CPU's C
libraries that use vector types the vectors' header, made once per compiler and flags in the compilation cache,
verified like any entry, and left out where they cannot be made."""

from __future__ import annotations

import ctypes
import hashlib
import json
from pathlib import Path

import pytest

from codegen.cuda_build import EMULATOR_FLAGS
from codegen.toolchain import cache, precompiled_headers
from codegen.toolchain.compiler import DEFAULT_C_FLAGS, CompilerInfo, find_c_compiler, gcc_major_version, run_compiler
from codegen.toolchain.precompiled_headers import header_to_precompile, precompiled_include_dir

VERSION = "test-0"
HEADER = "hidet_lang/cuda_primitives.h"
VECTORS_HEADER = "hidet_lang/cpu_vectors.h"
FLAGS = {"c++": EMULATOR_FLAGS, "c": DEFAULT_C_FLAGS}
"""Each language's library flags: the emulator's and the CPU modules'."""


def library_source(tag: str, language: str = "c++") -> str:
    """A translation unit that opens as the emulator's (C++) or a vectorized CPU module's (C) do, exporting
    `int twice(int)`; `tag` makes it unique."""
    if language == "c":
        return (f'#include "{VECTORS_HEADER}"\n#include "hidet_lang/host_runtime.h"\n/* {tag} */\n'
                "HL_EXPORT int twice(int x) { return 2 * x; }\n")
    return f'#include "{HEADER}"\n/* {tag} */\nextern "C" int twice(int x) {{ return 2 * x; }}\n'


def build(tag: str, language: str = "c++") -> Path:
    """Build `library_source(tag, language)` with the language's flags; the library's path."""
    return cache.build_library(library_source(tag, language), language=language, flags=FLAGS[language],
                               version=VERSION)


def meta_of(library: Path) -> dict:
    """The `meta.json` of the cache entry holding `library`."""
    return json.loads((library.parent / "meta.json").read_text())


def call_twice(library: Path, x: int) -> int:
    """Load `library` and call its `twice`."""
    twice = ctypes.CDLL(str(library)).twice
    twice.argtypes, twice.restype = (ctypes.c_int,), ctypes.c_int
    return twice(x)


def gcc_for(language: str, monkeypatch: pytest.MonkeyPatch) -> CompilerInfo:
    """The compiler of `language` ('c' or 'c++'), the environment's choice of it set aside; the tests of what GCC
    reads need GCC, which the project's CI has."""
    monkeypatch.delenv("CXX" if language == "c++" else "CC", raising=False)
    compiler = find_c_compiler(language)
    assert gcc_major_version(compiler) is not None, f"these tests need GCC as the {language} compiler"
    return compiler


@pytest.fixture
def gcc(cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> CompilerInfo:
    """The C++ compiler (GCC), with a fresh cache."""
    return gcc_for("c++", monkeypatch)


@pytest.fixture
def gcc_c(cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> CompilerInfo:
    """The C compiler (GCC), with a fresh cache."""
    return gcc_for("c", monkeypatch)


@pytest.mark.parametrize(("source", "language", "expected"), [
    (f'#include "{HEADER}"\nint x;\n', "c++", HEADER),
    (f'  #include  "{HEADER}"\n', "c++", HEADER),
    (f'#include "{HEADER}"\n', "c", None),  # each language has its own header
    (f'#include "{VECTORS_HEADER}"\n#include "hidet_lang/host_runtime.h"\n', "c", VECTORS_HEADER),
    (f'#include "{VECTORS_HEADER}"\n', "c++", None),
    ('#include "hidet_lang/host_runtime.h"\n', "c++", None),
    (f'#include "hidet_lang/host_runtime.h"\n#include "{VECTORS_HEADER}"\n', "c", None),
    (f'int x;\n#include "{HEADER}"\n', "c++", None),  # only a first include can be precompiled
])
def test_the_header_to_precompile_is_the_languages_header_on_the_first_line(source: str, language: str,
                                                                             expected: str | None) -> None:
    assert header_to_precompile(source, language) == expected


def test_libraries_share_one_precompiled_header(gcc: CompilerInfo, cache_root: Path) -> None:
    first, second = build("first"), build("second")
    assert first != second
    made = sorted(cache_root.rglob("*.gch"))
    assert len(made) == 1 and made[0].name == "cuda_primitives.h.gch"
    assert meta_of(first)["precompiled_dirs"] == meta_of(second)["precompiled_dirs"] == [str(made[0].parents[1])]
    assert (call_twice(first, 21), call_twice(second, -4)) == (42, -8)


def test_gcc_reads_the_precompiled_header_rather_than_the_header(gcc: CompilerInfo, cache_root: Path) -> None:
    library = build("read")
    meta = meta_of(library)
    (gch,) = cache_root.rglob("*.gch")
    includes = [f"-I{d}" for d in (*meta["precompiled_dirs"], *meta["include_dirs"])]
    # -H lists every header read, with `!` before a precompiled header used and `x` before one found unusable
    status, printed = run_compiler((*gcc.command, "-fsyntax-only", "-H", "-Winvalid-pch", "-fPIC", *meta["flags"],
                                    *meta["workaround_flags"], *includes, str(library.parent / "lib.cpp")))
    assert status == 0, printed
    assert f"! {gch}" in printed, printed[:2000]
    assert "cuda_emulator.h" not in printed  # the headers behind it come from the precompiled header


def test_a_vectorized_cpu_library_reads_the_vectors_header_precompiled(gcc_c: CompilerInfo, cache_root: Path) -> None:
    first, second = build("vectors first", "c"), build("vectors second", "c")
    (gch,) = cache_root.rglob("*.gch")
    assert gch.name == "cpu_vectors.h.gch"
    assert meta_of(first)["precompiled_dirs"] == meta_of(second)["precompiled_dirs"] == [str(gch.parents[1])]
    assert (call_twice(first, 21), call_twice(second, -4)) == (42, -8)
    meta = meta_of(first)
    includes = [f"-I{d}" for d in (*meta["precompiled_dirs"], *meta["include_dirs"])]
    status, printed = run_compiler((*gcc_c.command, "-fsyntax-only", "-H", "-Winvalid-pch", "-fPIC", *meta["flags"],
                                    *meta["workaround_flags"], *includes, str(first.parent / "lib.c")))
    assert status == 0, printed
    assert f"! {gch}" in printed and "immintrin.h" not in printed, printed[:2000]


def test_a_damaged_precompiled_header_is_rebuilt_not_read(gcc: CompilerInfo, cache_root: Path) -> None:
    build("before")
    (gch,) = cache_root.rglob("*.gch")
    intact = gch.read_bytes()
    gch.write_bytes(intact[: len(intact) // 2])
    cache.clear_memory_cache()
    assert call_twice(build("after"), 5) == 10
    (rebuilt,) = cache_root.rglob("*.gch")
    recorded = json.loads((rebuilt.parents[1] / "meta.json").read_text())
    assert rebuilt.stat().st_size == recorded["pch_size"] > len(intact) // 2
    assert hashlib.sha256(rebuilt.read_bytes()).hexdigest() == recorded["pch_sha256"]


def test_a_failed_precompile_leaves_the_library_to_read_the_header(gcc: CompilerInfo,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kwargs: object) -> Path:
        raise RuntimeError("precompiling failed")

    monkeypatch.setattr(cache, "precompiled_include_dir", failing)
    library = build("without")
    assert meta_of(library)["precompiled_dirs"] == []
    assert call_twice(library, 8) == 16


def test_only_gcc_gets_a_precompiled_header(tmp_path: Path) -> None:
    other = CompilerInfo(command=(str(tmp_path / "no-such-clang++"),), identity="other")
    assert precompiled_include_dir(tmp_path, HEADER, language="c++", compiler=other, flags=EMULATOR_FLAGS,
                                   include_dirs=(), include_hash="", version=VERSION) is None
    assert not any(tmp_path.iterdir())


def test_the_precompiled_headers_exist_as_named() -> None:
    from codegen.toolchain.headers import INCLUDE_DIR

    assert all((INCLUDE_DIR / header).is_file() for header in precompiled_headers.PRECOMPILED_HEADERS.values())
