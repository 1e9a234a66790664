"""Build hand-written CUDA C with the CUDA emulator's header and launch its kernels from Python (tests only).

`build_module(source, kernels, out_dir)` appends, for each kernel, the `<kernel>__entry(void **args)` trampoline
the code generator emits and a host function `launch_<kernel>(gx, gy, gz, bx, by, bz, dynamic_smem, needs_fibers,
params...)` that calls `hl_emu_launch`; compiles the whole as one C++ translation unit with the emulator flags
(`codegen.toolchain.compiler.compile_shared_library`), linked with the emulator's runtime object (from the
compilation cache, built with the same flags); and loads it with ctypes. `EmulatorModule.launch` passes numpy
arrays by pointer and scalars by value, raises `EmulatorLaunchError` with `hl_emu_error_message()` when the
launch fails, and tells `codegen.runtime.emulator_memory` of the launch, as the modules the code generator builds do.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codegen.runtime import emulator_memory
from codegen.toolchain.cache import emulator_runtime_object
from codegen.toolchain.compiler import compile_shared_library, find_c_compiler
from codegen.toolchain.headers import INCLUDE_DIR, cuda_limit_flags
from hidet_lang.version import __version__

RUNTIME_FLAGS: tuple[str, ...] = ("-std=c++17", "-O2", "-fopenmp", "-DHIDET_LANG_EMULATOR", *cuda_limit_flags())
"""The flags of a module and of the emulator's runtime object it links."""
EMULATOR_FLAGS: tuple[str, ...] = (*RUNTIME_FLAGS, f"-I{INCLUDE_DIR}")

_SCALARS: dict[str, Any] = {
    "int": ctypes.c_int32,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "unsigned": ctypes.c_uint32,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
}


class EmulatorLaunchError(RuntimeError):
    """`hl_emu_launch` returned nonzero; the message is `hl_emu_error_message()`."""


@dataclass(frozen=True)
class Kernel:
    """A `__global__` function of the source: its name, whether it needs fibers, and its C parameter types."""

    name: str
    needs_fibers: bool
    param_types: tuple[str, ...]


def parse_kernels(source: str) -> list[Kernel]:
    """Find the `extern "C" __global__` kernels of `source` and their parameter types.

    A kernel needs fibers when its body (up to the next kernel) mentions a barrier or a warp operation, as the
    code generator decides from the IR.
    """
    bounds = r"(?:__launch_bounds__\([^)]*\)\s*)?"
    pattern = re.compile(rf'extern\s+"C"\s+__global__\s+{bounds}void\s+{bounds}(\w+)\s*\(([^)]*)\)')
    matches = list(pattern.finditer(source))
    kernels = []
    for k, match in enumerate(matches):
        body = source[match.end() : matches[k + 1].start() if k + 1 < len(matches) else len(source)]
        sync = re.search(r"__syncthreads|__syncwarp|hl_shfl|hl_ballot|hl_any_sync|hl_all_sync|hl_syncwarp", body)
        params = [p.strip() for p in match.group(2).split(",") if p.strip()]
        types = tuple(re.sub(r"\b\w+$", "", p).strip() for p in params)
        kernels.append(Kernel(match.group(1), sync is not None, types))
    return kernels


def glue(kernel: Kernel) -> str:
    """The entry trampoline of `kernel` and its host launcher `launch_<name>`."""
    n = len(kernel.param_types)
    unpack = ", ".join(f"*({t} *)args[{i}]" for i, t in enumerate(kernel.param_types))
    params = "".join(f", {t} p{i}" for i, t in enumerate(kernel.param_types))
    addresses = ", ".join(f"(void *)&p{i}" for i in range(n)) or "0"
    return (
        f'extern "C" void {kernel.name}__entry(void **args) {{ (void)args; {kernel.name}({unpack}); }}\n'
        f'extern "C" int launch_{kernel.name}(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, '
        f"unsigned bz, size_t smem, int needs_fibers{params}) {{\n"
        f"    void *args[] = {{{addresses}}};\n"
        f'    return hl_emu_launch({kernel.name}__entry, "{kernel.name}", needs_fibers, gx, gy, gz, bx, by, bz, '
        f"smem, args);\n"
        f"}}\n"
    )


def _dims(value: int | Sequence[int]) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    return (*dims, *(1,) * (3 - len(dims)))  # type: ignore[return-value]


class EmulatorModule:
    """A loaded emulator module: launch its kernels, read the assertion line."""

    def __init__(self, lib: ctypes.CDLL, kernels: Sequence[Kernel], source: str, path: Path) -> None:
        self.lib = lib
        self.source = source
        self.path = path
        self.kernels = {k.name: k for k in kernels}
        lib.hl_emu_error_message.restype = ctypes.c_char_p
        lib.hl_emu_error_message.argtypes = []
        lib.hl_emu_take_assert_line.restype = ctypes.c_int
        lib.hl_emu_take_assert_line.argtypes = []
        for k in kernels:
            fn = getattr(lib, f"launch_{k.name}")
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_uint] * 6 + [ctypes.c_size_t, ctypes.c_int] + [
                _SCALARS.get(t, ctypes.c_void_p) if "*" not in t else ctypes.c_void_p for t in k.param_types
            ]

    def launch(
        self,
        kernel: str,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        *args: Any,
        smem: int = 0,
        needs_fibers: bool | None = None,
    ) -> None:
        """Launch `kernel` on a `grid` of `block`s; numpy arrays are passed by pointer. Raises on failure."""
        k = self.kernels[kernel]
        fibers = k.needs_fibers if needs_fibers is None else needs_fibers
        values = [a.ctypes.data if isinstance(a, np.ndarray) else a for a in args]
        rc = getattr(self.lib, f"launch_{kernel}")(*_dims(grid), *_dims(block), smem, int(fibers), *values)
        emulator_memory.launched(self.lib)
        if rc != 0:
            raise EmulatorLaunchError(self.error_message())

    def error_message(self) -> str:
        return (self.lib.hl_emu_error_message() or b"").decode("utf-8", "replace")

    def take_assert_line(self) -> int:
        return int(self.lib.hl_emu_take_assert_line())

    def line_of(self, marker: str) -> int:
        """The 1-based line of the full source holding `marker` (which must occur once)."""
        lines = [i for i, text in enumerate(self.source.splitlines(), start=1) if marker in text]
        assert len(lines) == 1, f"{marker!r} occurs on lines {lines}"
        return lines[0]


def build_module(source: str, out_dir: Path, name: str = "module", flags: Sequence[str] = ()) -> EmulatorModule:
    """Compile `source` (CUDA C including hidet_lang/cuda_primitives.h) plus launch glue for the emulator."""
    kernels = parse_kernels(source)
    full = source + "\n// ---- launch glue\n" + "".join(glue(k) for k in kernels)
    path = Path(out_dir) / f"lib{name}.so"
    runtime = Path(out_dir) / f"{name}_runtime.o"
    runtime.write_bytes(emulator_runtime_object((*RUNTIME_FLAGS, *flags), version=__version__))
    compile_shared_library(
        full, path, compiler=find_c_compiler("c++"), flags=[*EMULATOR_FLAGS, *flags], language="c++",
        link_objects=[runtime],
    )
    return EmulatorModule(ctypes.CDLL(str(path)), kernels, full, path)


# ----------------------------------------------------------------------------------------------------
# Launching in a separate process: a launch that hangs or crashes cannot take the test session with it.

_CHILD = r"""
import ctypes, json, sys
spec = json.loads(sys.argv[1])
sys.path[:0] = spec["sys_path"]
from pathlib import Path
import numpy as np
from emulator_harness import EmulatorLaunchError, EmulatorModule, Kernel
kernels = [Kernel(k[0], k[1], tuple(k[2])) for k in spec["kernels"]]
module = EmulatorModule(ctypes.CDLL(spec["path"]), kernels, "", Path(spec["path"]))
args = [np.array(a[2], dtype=np.dtype(a[1])) if isinstance(a, list) else a for a in spec["args"]]
result = {"rc": 0, "message": ""}
try:
    module.launch(spec["kernel"], spec["grid"], spec["block"], *args, smem=spec["smem"],
                  needs_fibers=spec["needs_fibers"])
except EmulatorLaunchError as exc:
    result = {"rc": 1, "message": str(exc)}
result["assert_line"] = module.take_assert_line()
result["arrays"] = [a.tolist() for a in args if isinstance(a, np.ndarray)]
print("RESULT " + json.dumps(result), flush=True)
"""


@dataclass
class IsolatedResult:
    """What a launch in a child process gave: `rc` None when the child died before reporting."""

    returncode: int
    rc: int | None
    message: str
    assert_line: int
    arrays: list[np.ndarray]
    output: str


def launch_isolated(
    module: EmulatorModule,
    kernel: str,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    *args: Any,
    smem: int = 0,
    needs_fibers: bool | None = None,
    env: dict[str, str | None] | None = None,
    timeout: float = 120.0,
) -> IsolatedResult:
    """Like `EmulatorModule.launch`, in a fresh Python process that loads the module's library.

    Arrays are copied to the child and back (in `arrays`, in argument order). `env` adds (str) or removes (None)
    environment variables. A child still running after `timeout` seconds fails the calling test: a hang.
    """
    import json
    import os
    import subprocess
    import sys

    spec = {
        "sys_path": [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parent)],
        "path": str(module.path),
        "kernels": [[k.name, k.needs_fibers, list(k.param_types)] for k in module.kernels.values()],
        "kernel": kernel,
        "grid": list(_dims(grid)),
        "block": list(_dims(block)),
        "smem": smem,
        "needs_fibers": needs_fibers,
        "args": [["array", a.dtype.str, a.tolist()] if isinstance(a, np.ndarray) else a for a in args],
    }
    child_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            child_env.pop(key, None)
        else:
            child_env[key] = value
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=child_env,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"launching {kernel} did not finish within {timeout:g} s: the emulator hung") from None
    output = done.stdout + done.stderr
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            arrays = [np.array(values, dtype=a.dtype) for values, a in
                      zip(result["arrays"], [a for a in args if isinstance(a, np.ndarray)])]
            return IsolatedResult(done.returncode, result["rc"], result["message"], result["assert_line"], arrays,
                                  output)
    return IsolatedResult(done.returncode, None, "", 0, [], output)
