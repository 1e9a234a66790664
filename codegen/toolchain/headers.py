"""The project's C, C++ and CUDA headers, which generated sources include (`#include "hidet_lang/..."`).

They live in `INCLUDE_DIR/hidet_lang/`: `host_runtime.h` (every host source), `cpu_vectors.h` (C sources whose
functions use vector types), `cuda_launch.h` (the kernel launchers), `cuda_primitives.h` (every CUDA source; with
`-DHIDET_LANG_EMULATOR` it includes the emulator, `cuda_emulator.h` and its `emulator_*.h` parts, whose out-of-line
code is `emulator_runtime.cpp`, compiled once into the object every emulator library links:
`codegen.toolchain.emulator_runtime`) and `cuda_limits.h`. Every compiler of generated code searches `INCLUDE_DIR`:
the C and C++ compilers through the compilation cache (`codegen.toolchain.cache`), NVRTC through the `include_dirs`
its callers pass; the cache keys cover the contents of every header.

Values that live in Python reach the headers as compiler defines: `cuda_limit_flags`.
"""

from __future__ import annotations

import functools
from pathlib import Path

from hidet_lang.cuda_limits import (
    MAX_BLOCK_DIM,
    MAX_CLUSTER_SIZE,
    MAX_GRID_DIM,
    MAX_STATIC_SHARED_BYTES,
    MAX_THREADS_PER_BLOCK,
)

INCLUDE_DIR = Path(__file__).resolve().parent.parent / "include"


@functools.cache
def cuda_limit_flags() -> tuple[str, ...]:
    """The `-D` flags that give the CUDA launch limits of `hidet_lang.cuda_limits` to the headers that
    check launches (`cuda_launch.h` and the emulator's; see `cuda_limits.h`)."""
    defines = {"HL_MAX_THREADS_PER_BLOCK": MAX_THREADS_PER_BLOCK, "HL_MAX_STATIC_SHARED_BYTES": MAX_STATIC_SHARED_BYTES,
               "HL_MAX_CLUSTER_SIZE": MAX_CLUSTER_SIZE,
               **{f"HL_MAX_BLOCK_DIM_{axis}": n for axis, n in zip("XYZ", MAX_BLOCK_DIM)},
               **{f"HL_MAX_GRID_DIM_{axis}": n for axis, n in zip("XYZ", MAX_GRID_DIM)}}
    return tuple(f"-D{name}={value}" for name, value in defines.items())
