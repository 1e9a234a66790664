"""Tests of the emulator's runtime object (codegen/toolchain/emulator_runtime.py): `emulator_runtime.cpp` is compiled
once per compiler and flags into the compilation cache and linked into every emulator library, each library keeping
its own runtime state, with the runtime's symbols hidden; a damaged object in the cache is rebuilt, not linked."""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import numpy as np
import pytest
from emulator_harness import EmulatorLaunchError, build_module

from codegen.cuda_build import EMULATOR_FLAGS
from codegen.toolchain import cache, emulator_runtime
from codegen.toolchain.cache_entries import META_NAME
from codegen.toolchain.elf import read_symbols

VERSION = "test-0"

# Two modules, each with a kernel that fails (a device assertion, a barrier divergence) and one that runs.
FIRST_SRC = r"""
#include "hidet_lang/cuda_primitives.h"

extern "C" __global__ void first_asserts(int32_t *out) {
    out[threadIdx.x] = 1;
    if (threadIdx.x == 3) hl_assert_fail(1111);
}

extern "C" __global__ void first_diverges(int32_t *out) {
    if (threadIdx.x < 16) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1;
}
"""

SECOND_SRC = r"""
#include "hidet_lang/cuda_primitives.h"

extern "C" __global__ void second_scales(int32_t *out) {
    __shared__ int32_t s[64];
    s[threadIdx.x] = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = 3 * s[63 - threadIdx.x];
}
"""


def library_source(tag: str) -> str:
    """A C++ translation unit as the emulator's open, that launches nothing; `tag` makes it unique."""
    return f'#include "hidet_lang/cuda_primitives.h"\n/* {tag} */\nextern "C" int twice(int x) {{ return 2 * x; }}\n'


def build(tag: str) -> Path:
    """Build `library_source(tag)` as an emulator library (linking the runtime); its path."""
    return cache.build_library(library_source(tag), language="c++", flags=EMULATOR_FLAGS, version=VERSION,
                               emulator_runtime=True)


def runtime_entries(root: Path) -> list[Path]:
    """The published runtime-object entries of the cache at `root`."""
    found = []
    for meta in root.glob(f"*/*/{META_NAME}"):
        if json.loads(meta.read_text()).get("source") == emulator_runtime.RUNTIME_SOURCE:
            found.append(meta.parent)
    return found


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The compiler commands that build the runtime object, as they run."""
    commands: list[tuple[str, ...]] = []
    real = emulator_runtime.run_compiler

    def counting(command: tuple[str, ...]) -> tuple[int, str]:
        commands.append(command)
        return real(command)

    monkeypatch.setattr(emulator_runtime, "run_compiler", counting)
    return commands


def test_two_modules_keep_their_own_runtime_state(cache_root: Path, tmp_path: Path) -> None:
    first = build_module(FIRST_SRC, tmp_path, "first")
    second = build_module(SECOND_SRC, tmp_path, "second")
    out = np.zeros(64, np.int32)
    first.launch("first_asserts", 1, 32, out)  # the assertion stops the launch quietly, as on a GPU
    with pytest.raises(EmulatorLaunchError, match="barrier divergence"):
        first.launch("first_diverges", 1, 32, out)
    assert second.error_message() == ""  # the other module's error text is its own
    assert second.take_assert_line() == 0  # and so is its first failed assertion
    scaled = np.zeros(128, np.int32)
    second.launch("second_scales", 2, 64, scaled)
    expected = np.array([3 * (b * 64 + 63 - t) for b in range(2) for t in range(64)], np.int32)
    np.testing.assert_array_equal(scaled, expected)
    assert second.error_message() == ""
    assert "barrier divergence" in first.error_message()
    assert first.take_assert_line() == 1111
    assert first.take_assert_line() == 0


def test_the_runtime_is_linked_hidden_with_its_entry_points_exported(cache_root: Path, tmp_path: Path) -> None:
    first = build_module(FIRST_SRC, tmp_path, "first")
    second = build_module(SECOND_SRC, tmp_path, "second")
    for module in (first, second):
        assert hasattr(module.lib, "hl_emu_launch_blocks") and hasattr(module.lib, "hl_emu_take_assert_line")
        with pytest.raises(AttributeError):  # hidden: dlsym cannot find the runtime's own functions
            module.lib._ZN6hl_emu7barrierEiii  # noqa: B018 (the lookup is the test)
        names = {s.name for s in read_symbols(module.path.read_bytes())}
        assert "_ZN6hl_emu7barrierEiii" in names  # linked in: the module runs its own copy
    address = [ctypes.cast(m.lib.hl_emu_launch, ctypes.c_void_p).value for m in (first, second)]
    assert address[0] != address[1]


def test_the_runtime_object_is_built_once(cache_root: Path, compiles: list[tuple[str, ...]]) -> None:
    first, second = build("first"), build("second")
    assert first != second
    assert len(compiles) == 1, "the second library links the runtime object the first one built"
    (entry,) = runtime_entries(cache_root)
    meta = json.loads((entry / META_NAME).read_text())
    assert "-fvisibility=hidden" in meta["flags"] and "-fPIC" in meta["flags"]
    for library in (first, second):
        assert json.loads((library.parent / META_NAME).read_text())["emulator_runtime"] is True
        assert not (library.parent / emulator_runtime.RUNTIME_OBJECT.file).exists()  # linked, not kept
        lib = ctypes.CDLL(str(library))
        assert lib.twice(21) == 42 and hasattr(lib, "hl_emu_launch")
    cache.clear_memory_cache()
    build("third")  # a new process's build finds the object on disk
    assert len(compiles) == 1


def test_the_library_key_covers_the_runtime(cache_root: Path) -> None:
    plain = cache.build_library(library_source("same"), language="c++", flags=EMULATOR_FLAGS, version=VERSION)
    linked = build("same")
    assert plain.parent.name != linked.parent.name
    assert not hasattr(ctypes.CDLL(str(plain)), "hl_emu_launch")


def test_a_damaged_runtime_object_is_rebuilt_not_linked(cache_root: Path, compiles: list[tuple[str, ...]]) -> None:
    build("first")
    (entry,) = runtime_entries(cache_root)
    obj = entry / emulator_runtime.RUNTIME_OBJECT.file
    good = obj.read_bytes()
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF  # a flipped byte in the code: links, but is not what was built
    obj.chmod(0o600)
    obj.write_bytes(bytes(damaged))
    cache.clear_memory_cache()
    library = build("second")
    assert len(compiles) == 2, "the damaged object was rebuilt"
    (entry,) = runtime_entries(cache_root)
    assert (entry / emulator_runtime.RUNTIME_OBJECT.file).read_bytes() == good  # the same compiler, the same object
    assert ctypes.CDLL(str(library)).twice(4) == 8


def test_an_exported_emulator_library_installs_under_the_key_a_build_looks_up(cache_root: Path,
                                                                              tmp_path: Path) -> None:
    library = build("exported")
    exported = cache.export_entry(library)
    assert exported.meta["emulator_runtime"] is True
    other = cache.CompilationCache(tmp_path / "other")
    installed = other.install_entry(exported, version=VERSION)
    assert installed.parent.name == library.parent.name
    rebuilt = other.build_library(library_source("exported"), language="c++", flags=EMULATOR_FLAGS, version=VERSION,
                                  emulator_runtime=True)
    assert rebuilt == installed  # found, not compiled
