"""However many CUDA modules a process runs on the emulator, the memory maps their workers' stacks take stay
bounded (`codegen.runtime.emulator_memory`): the workers of the modules not run lately are released, and a released
module maps its stacks again at its next launch. Where the process is short of maps anyway, stacks run unguarded
and the emulator says so once."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from emulator_harness import EmulatorModule, build_module, parse_kernels

import hidet_lang as hidet
from codegen.runtime import emulator_memory
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs, i32
from hidet_lang.cuda import blockIdx, shared_tensor, syncthreads, threadIdx

SOURCE = r"""
#include "hidet_lang/cuda_primitives.h"

extern "C" __global__ void reverse_add(int32_t k, int32_t *out) {
    __shared__ int32_t s[1024];
    s[threadIdx.x] = (int32_t)threadIdx.x + k;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void spin(int32_t *flags) {
    __atomic_store_n(&flags[0], 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE)) {
    }
}
"""

PER_LIBRARY_MAPS = 16
"""More than the memory maps a loaded emulator library itself takes (its segments), which stay while it is loaded."""


def maps() -> int:
    """The memory maps (VMAs) of this process."""
    with open("/proc/self/maps") as f:
        return len(f.readlines())


def held_maps(lib: ctypes.CDLL) -> int:
    held = lib.hl_emu_held_maps
    held.restype = ctypes.c_long
    return held()


def reverse_add(module: EmulatorModule, k: int, threads: int = 256) -> None:
    """Launch `reverse_add` (two blocks of `threads`, a barrier) and check its result."""
    out = np.zeros(2 * threads, np.int32)
    module.launch("reverse_add", 2, threads, k, out)
    np.testing.assert_array_equal(out, np.tile(np.arange(threads - 1, -1, -1, dtype=np.int32) + k, 2))


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> EmulatorModule:
    return build_module(SOURCE, tmp_path_factory.mktemp("emu_maps"), "maps")


def copies(library: EmulatorModule, directory: Path, count: int) -> list[EmulatorModule]:
    """`count` copies of the library, each loaded from its own file: as many distinct modules, with their own
    emulator state."""
    modules = []
    for i in range(count):
        path = directory / f"libmaps_{i}.so"
        shutil.copyfile(library.path, path)
        modules.append(EmulatorModule(ctypes.CDLL(str(path)), parse_kernels(library.source), library.source, path))
    return modules


def test_the_maps_of_many_modules_stay_bounded(library: EmulatorModule, tmp_path: Path) -> None:
    """200 modules of 256-thread blocks with a barrier: about 2 * 257 maps a worker each, without releases far
    past Linux's default limit (65530) on any machine."""
    count = 200
    modules = copies(library, tmp_path, count)
    before = maps()
    for k, module in enumerate(modules):
        reverse_add(module, k)
        reverse_add(module, k)
    newest = held_maps(modules[-1].lib)
    assert newest > 0
    assert sum(held_maps(m.lib) for m in modules) <= emulator_memory.MAP_BUDGET + newest
    assert maps() - before <= emulator_memory.MAP_BUDGET + newest + count * PER_LIBRARY_MAPS
    reverse_add(modules[0], 7)  # released long ago: its stacks are mapped again


def test_a_released_module_launches_again(library: EmulatorModule) -> None:
    reverse_add(library, 3, threads=1024)
    assert held_maps(library.lib) > 2 * 1024
    assert library.lib.hl_emu_release_workers() == 0
    assert held_maps(library.lib) == 0
    reverse_add(library, 4, threads=1024)
    reverse_add(library, 5, threads=32)  # the stacks for 1024 threads serve 32
    assert held_maps(library.lib) > 2 * 1024


def test_workers_are_not_released_while_a_launch_of_the_module_runs(library: EmulatorModule) -> None:
    flags = np.zeros(2, np.int32)
    launch = threading.Thread(target=library.launch, args=("spin", 1, 1, flags))
    launch.start()
    try:
        deadline = time.monotonic() + 60
        while not flags[0] and time.monotonic() < deadline:
            time.sleep(0.001)
        assert flags[0], "the kernel did not start"
        assert library.lib.hl_emu_release_workers() == -1
    finally:
        flags[1] = 1
        launch.join()
    assert library.lib.hl_emu_release_workers() == 0
    reverse_add(library, 1)


@pytest.mark.skipif(backend() != "emulator", reason="built modules run the emulator only where there is no GPU")
def test_built_modules_release_their_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no budget, only the module called last keeps its workers; the others map theirs again when called."""
    monkeypatch.delenv("HIDET_LANG_VERIFY_CUBINS", raising=False)
    monkeypatch.setattr(emulator_memory, "MAP_BUDGET", 0)

    def module(k: int):
        with hidet.script_module() as m:

            @hidet.script
            def add_reversed(out: i32[2048]):
                attrs.func_kind = "cuda_kernel"
                attrs.cuda.block_dim = 1024
                attrs.cuda.grid_dim = 2
                s = shared_tensor(i32, [1024])
                s[threadIdx.x] = threadIdx.x + k
                syncthreads()
                out[blockIdx.x * 1024 + threadIdx.x] = s[1023 - threadIdx.x]

        return m.build()

    built = [module(k) for k in (100, 200, 300)]
    libs = [ctypes.CDLL(m.library_path) for m in built]
    for round_ in range(2):
        for k, m in enumerate(built):
            out = np.zeros(2048, np.int32)
            m(out)
            np.testing.assert_array_equal(out, np.tile(np.arange(1023, -1, -1, dtype=np.int32) + 100 * (k + 1), 2))
            assert [held_maps(lib) > 0 for lib in libs] == [i == k for i in range(3)], (round_, k)


FILL_AND_LAUNCH = r"""
import ctypes, json, mmap, sys
sys.path[:0] = json.loads(sys.argv[1])
from pathlib import Path
import numpy as np
from emulator_harness import EmulatorModule, parse_kernels
source = Path(sys.argv[3]).read_text()
module = EmulatorModule(ctypes.CDLL(sys.argv[2]), parse_kernels(source), source, Path(sys.argv[2]))
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
outs = [np.zeros(2048, np.int32) for _ in range(2)]
limit = int(Path("/proc/sys/vm/max_map_count").read_text())
pages = limit - len(Path("/proc/self/maps").read_text().splitlines()) - 600  # leave 600 maps: too few for 1024 stacks
fill = libc.mmap(None, pages * mmap.PAGESIZE, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
for page in range(1, pages, 2):  # one map a page
    libc.mprotect(fill + page * mmap.PAGESIZE, mmap.PAGESIZE, 0)  # PROT_NONE
for out in outs:
    module.launch("reverse_add", 2, 1024, 9, out)
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.munmap(fill, pages * mmap.PAGESIZE)
expected = np.tile(np.arange(1023, -1, -1, dtype=np.int32) + 9, 2)
print("RESULT", all((out == expected).all() for out in outs))
"""


def test_stacks_run_unguarded_where_maps_are_short_and_the_emulator_says_so(library: EmulatorModule) -> None:
    """In a process left with fewer free maps than 1024 guarded stacks need, the launches still run, and stderr
    says once that their stacks have no guards."""
    harness = str(Path(__file__).resolve().parent)
    source = library.path.with_suffix(".cu")
    source.write_text(library.source)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", FILL_AND_LAUNCH, f'["{harness}"]', str(library.path), str(source)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "RESULT True" in done.stdout, done.stdout + done.stderr[-4000:]
    assert done.stderr.count("run without overflow guards") == 1, done.stderr[-4000:]
