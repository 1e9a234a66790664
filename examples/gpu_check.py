"""The GPU check: run the GPU-marked tests, then time kernels against cuBLAS/PyTorch/CuPy on the same GPU.

Prints the test summary and a table of medians (vector add, tiled matmul) side by side with the peers found; each
hidet-lang kernel's output is checked against numpy once per size before it is timed.
Takes a few minutes on one GPU. Run: python examples/gpu_check.py (`--quick`: small sizes, a smoke run of the
script itself, as the test suite does on its simulated GPU).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))


def run_gpu_tests() -> int:
    """Run `pytest -m gpu` and print its summary; the exit code."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests"], cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    print(done.stdout[-3000:], done.stderr[-2000:])
    return done.returncode


def median_ms(fn, sync, *args, repeats: int) -> float:
    """Median milliseconds of `fn(*args)` followed by `sync()`."""
    fn(*args)
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        sync()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def vector_add():
    """A built CUDA vector add: one thread per element, 256 threads a block."""
    import hidet_lang as hidet
    from hidet_lang import attrs, f32, i32
    from hidet_lang.cuda import blockIdx, threadIdx

    with hidet.script_module() as module:

        @hidet.script
        def vec_add(n: i32, a: f32[n], b: f32[n], c: f32[n]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 256
            attrs.cuda.grid_dim = (n + 255) // 256
            i = blockIdx.x * 256 + threadIdx.x
            if i < n:
                c[i] = a[i] + b[i]

    return module.build()


def peers() -> dict[str, object]:
    found = {}
    try:
        import torch

        if torch.cuda.is_available():
            found["torch"] = torch
    except ImportError:
        pass
    try:
        import cupy

        found["cupy"] = cupy
    except ImportError:
        pass
    return found


def main() -> int:
    import hidet_lang as hidet
    from codegen.runtime import cuda_driver

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats")
    quick = parser.parse_args().quick
    repeats = 3 if quick else 30

    if not cuda_driver.gpu_available():
        print("no CUDA GPU is usable here; this check needs one")
        return 1
    status = run_gpu_tests()
    import cuda_matmul

    sync = cuda_driver.synchronize
    rows = []
    n = 1 << (12 if quick else 24)
    add = vector_add()
    a, b, c = (hidet.randn([n], device="cuda") for _ in range(3))
    found = peers()
    add(n, a, b, c)
    sync()
    np.testing.assert_array_equal(c.numpy(), a.numpy() + b.numpy())
    row = {"hidet-lang": median_ms(add, sync, n, a, b, c, repeats=repeats)}
    if "torch" in found:
        torch = found["torch"]
        ta, tb = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        row["torch"] = median_ms(torch.add, torch.cuda.synchronize, ta, tb, repeats=repeats)
    rows.append((f"vector add {n} f32", row))
    matmul = cuda_matmul.module.build()
    for size in (64, 96) if quick else (1024, 2048, 4096):
        x, w, y = (hidet.randn([size, size], device="cuda") for _ in range(3))
        matmul(size, size, size, x, w, y)
        sync()
        # float32 sums of `size` products in another order than numpy's BLAS
        np.testing.assert_allclose(y.numpy(), x.numpy() @ w.numpy(), rtol=1e-5, atol=1e-5 * size)
        row = {"hidet-lang": median_ms(matmul, sync, size, size, size, x, w, y, repeats=repeats)}
        if "torch" in found:
            torch = found["torch"]
            tx, tw = torch.randn(size, size, device="cuda"), torch.randn(size, size, device="cuda")
            row["torch (cuBLAS)"] = median_ms(torch.matmul, torch.cuda.synchronize, tx, tw, repeats=repeats)
        if "cupy" in found:
            cp = found["cupy"]
            cx, cw = cp.random.randn(size, size, dtype=np.float32), cp.random.randn(size, size, dtype=np.float32)
            row["cupy (cuBLAS)"] = median_ms(cp.matmul, cp.cuda.Device().synchronize, cx, cw, repeats=repeats)
        rows.append((f"matmul {size}^3 f32", row))
    columns = sorted({k for _, r in rows for k in r}, key=lambda k: k != "hidet-lang")
    print(f"{'kernel':<22}" + "".join(f"{c:>18}" for c in columns))
    for name, r in rows:
        print(f"{name:<22}" + "".join(f"{r[c]:>15.3f} ms" if c in r else f"{'-':>18}" for c in columns))
    return status


if __name__ == "__main__":
    sys.exit(main())
