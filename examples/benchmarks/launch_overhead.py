"""The host's cost of the GPU runtime, per call: allocating device arrays, eager operators, kernel calls.

Cases: `ops.empty` of a large and a small 'cuda' tensor (the array collected at once, so each call after the
first is served by the caching allocator), an eager `a + b` of 16 floats (the launch overhead of an operator:
its dispatch, the output's allocation and the kernel's launch), a user kernel called with device arrays, and the
same call inside a `with hidet.cuda.stream(s):` block. Each time is the median of several loops (`timing.loop_time`),
in microseconds.

On the simulated GPU (tests/codegen/simulated_gpu: a stand-in driver whose launches run the emulator), kernels are
not run while timing (the driver's `fake_cuda_skip_kernels`), so that what is timed is the host's side alone;
every result is checked first with kernels running. On a real GPU each loop ends with a synchronization, so a
time there includes the device's.

`--quick` runs fewer calls (a smoke run of the script, not a measurement).

Run: python examples/benchmarks/launch_overhead.py [--quick]
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import loop_time  # noqa: E402

import hidet_lang as hidet  # noqa: E402
import stdlib_ops as ops  # noqa: E402
from codegen.runtime.arrays import uses_gpu  # noqa: E402
from hidet_lang import attrs, f32, i32  # noqa: E402
from hidet_lang.cuda import blockIdx, threadIdx  # noqa: E402

QUICK = "--quick" in sys.argv


def scale_kernel() -> object:
    """a[i] *= 2 for i < n."""
    with hidet.script_module() as module:

        @hidet.script
        def scale(n: i32, a: f32[n]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 64
            attrs.cuda.grid_dim = (n + 63) // 64
            i = blockIdx.x * 64 + threadIdx.x
            if i < n:
                a[i] = a[i] * 2.0

    return module.build()


def simulated_driver() -> ctypes.CDLL | None:
    """The simulated GPU's driver library, where the process runs on it."""
    if not uses_gpu():
        return None
    lib = ctypes.CDLL("libcuda.so.1")
    return lib if hasattr(lib, "fake_cuda_skip_kernels") else None


def per_call_us(fn: Callable[[], object]) -> float:
    """Microseconds a call of `fn`, the device's work included on a real GPU (a synchronization per loop)."""
    number = 200 if QUICK else 5000

    def loop() -> None:
        fn()

    seconds = loop_time(loop, number=number, repeat=3 if QUICK else 7)
    hidet.cuda.synchronize()
    return seconds * 1e6


def main() -> None:
    a = ops.asarray(np.arange(16, dtype=np.float32), device="cuda")
    b = ops.asarray(np.ones(16, np.float32), device="cuda")
    np.testing.assert_array_equal((a + b).numpy(), np.arange(16, dtype=np.float32) + 1)
    kernel = scale_kernel()
    x = hidet.asarray(np.ones(1000, np.float32), device="cuda")
    kernel(1000, x)
    np.testing.assert_array_equal(x.numpy(), np.full(1000, 2, np.float32))
    stream = hidet.cuda.Stream()

    def in_stream() -> None:
        with hidet.cuda.stream(stream):
            kernel(1000, x)

    cases = {
        "ops.empty([16384, 4096], 'cuda')": lambda: ops.empty([16384, 4096], device="cuda"),
        "ops.empty([16], 'cuda')": lambda: ops.empty([16], device="cuda"),
        "eager a + b, 16 floats": lambda: a + b,
        "kernel(1000, device array)": lambda: kernel(1000, x),
        "the same in a stream block": in_stream,
    }
    fake = simulated_driver()
    if fake is not None:
        fake.fake_cuda_skip_kernels(1)
    where = "simulated GPU, kernels not run" if fake is not None else ("GPU" if uses_gpu()
                                                                      else "CUDA emulator")
    print(f"host cost per call ({where}):")
    for name, fn in cases.items():
        print(f"  {name:36s} {per_call_us(fn):9.2f} us")
    if fake is not None:
        fake.fake_cuda_skip_kernels(0)
    stats = hidet.cuda.memory_stats()
    print(f"allocator: {stats['requests']} requests, {stats['driver_allocations']} from the driver")
    print("every result matched numpy first")


if __name__ == "__main__":
    main()
