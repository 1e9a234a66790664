"""stdlib_ops side by side with numpy and torch (CPU): eager dispatch overhead, the MLP graph's build time, and
its run time.

Prints one table:
- eager `x + y` on 16 floats with the kernel cached: the cost of dispatching a small operator;
- build time of the graph of examples/mlp.py (traced, optimized, compiled) for the CPU and for CUDA (a GPU or
  the emulator), cold (an empty compilation cache, in a fresh process) and warm (a fresh process, cache filled);
- one forward pass of that MLP at batch 64 on the CPU.
Fresh-process figures are medians over several child processes; per-call figures are medians of repeated loops.
torch is optional (the `bench` extra); without it its column says so.

Run: python examples/benchmarks/operators.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from timing import loop_time, medians  # examples/benchmarks/timing.py, beside this script

EXAMPLES = Path(__file__).resolve().parent.parent
RUNS = 3


# ------------------------------------------------------------------------------------------------ children
def child_build() -> dict[str, float]:
    """Build the MLP graph for the CPU and for CUDA in this process; seconds each (trace and optimize included)."""
    sys.path.insert(0, str(EXAMPLES))
    import mlp

    import stdlib_ops as ops

    times = {}
    for target in ("cpu", "cuda"):
        start = time.perf_counter()
        params = {k: ops.asarray(v) for k, v in mlp.make_weights(np.random.default_rng(0)).items()}
        x = ops.symbol(["batch", mlp.IN_FEATURES], dtype="float32")
        ops.optimize(ops.trace_from(mlp.mlp(x, params), inputs=[x])).build(target=target)
        times[target] = time.perf_counter() - start
    return times


def run_child(cache: str) -> dict[str, float]:
    env = dict(os.environ, HIDET_LANG_CACHE_DIR=cache, HIDET_LANG_CUDA=os.environ.get("HIDET_LANG_CUDA", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package runs
    out = subprocess.run([sys.executable, __file__, "--child"], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def build_times() -> tuple[dict[str, float], dict[str, float]]:
    """Median cold and warm build seconds per target."""
    cold, warm = [], []
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory(prefix="hidet_lang_bench_") as cache:
            cold.append(run_child(cache))
            warm.append(run_child(cache))
    return medians(cold), medians(warm)


# ------------------------------------------------------------------------------------------------ in process
def dispatch_overheads(torch) -> dict[str, float]:
    import stdlib_ops as ops

    a, b = np.random.rand(2, 16).astype(np.float32)
    x, y = ops.asarray(a), ops.asarray(b)
    np.testing.assert_allclose((x + y).numpy(), a + b, rtol=0)
    results = {"stdlib_ops": loop_time(lambda: x + y), "numpy": loop_time(lambda: a + b)}
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        results["torch"] = loop_time(lambda: ta + tb)
    return results


def mlp_forward(torch) -> dict[str, float]:
    sys.path.insert(0, str(EXAMPLES))
    import mlp

    import stdlib_ops as ops

    weights = mlp.make_weights(np.random.default_rng(0))
    params = {k: ops.asarray(v) for k, v in weights.items()}
    x = ops.symbol(["batch", mlp.IN_FEATURES], dtype="float32")
    compiled = ops.optimize(ops.trace_from(mlp.mlp(x, params), inputs=[x])).build(target="cpu")
    inputs = np.random.default_rng(1).standard_normal((64, mlp.IN_FEATURES)).astype(np.float32)
    expected = mlp.reference(inputs, weights)
    np.testing.assert_allclose(compiled(inputs).numpy(), expected, rtol=2e-4, atol=2e-4)

    def numpy_mlp() -> np.ndarray:
        h = inputs @ weights["w1"] + weights["b1"]
        mean, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
        h = np.maximum((h - mean) / np.sqrt(var + 1e-5) * weights["gamma"] + weights["beta"], 0)
        return h @ weights["w2"] + weights["b2"]

    np.testing.assert_allclose(numpy_mlp(), expected, rtol=2e-4, atol=2e-4)
    results = {"stdlib_ops": loop_time(lambda: compiled(inputs), 200), "numpy": loop_time(numpy_mlp, 200)}
    if torch is not None:
        f = torch.nn.functional
        tw = {k: torch.from_numpy(v) for k, v in weights.items()}
        tx = torch.from_numpy(inputs)

        def torch_mlp():
            with torch.no_grad():
                h = f.relu(f.layer_norm(tx @ tw["w1"] + tw["b1"], (mlp.HIDDEN,), tw["gamma"], tw["beta"], 1e-5))
                return h @ tw["w2"] + tw["b2"]

        np.testing.assert_allclose(torch_mlp().numpy(), expected, rtol=2e-4, atol=2e-4)
        results["torch"] = loop_time(torch_mlp, 200)
    return results


def main() -> None:
    try:
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
    except ImportError:
        torch = None
    dispatch = dispatch_overheads(torch)
    forward = mlp_forward(torch)
    cold, warm = build_times()
    missing = "(torch not installed)"

    def cell(results: dict[str, float], key: str, scale: float, unit: str) -> str:
        return f"{results[key] * scale:.2f} {unit}" if key in results else missing

    print(f"{'':44} | {'stdlib_ops':>12} | {'numpy':>10} | {'torch':>10} | stdlib_ops / numpy")
    print("-" * 104)
    print(f"{'eager x + y, 16 floats (per call)':44} | {cell(dispatch, 'stdlib_ops', 1e6, 'us'):>12} | "
          f"{cell(dispatch, 'numpy', 1e6, 'us'):>10} | {cell(dispatch, 'torch', 1e6, 'us'):>10} | "
          f"{dispatch['stdlib_ops'] / dispatch['numpy']:.1f}x")
    print(f"{'MLP forward, batch 64, cpu':44} | {cell(forward, 'stdlib_ops', 1e3, 'ms'):>12} | "
          f"{cell(forward, 'numpy', 1e3, 'ms'):>10} | {cell(forward, 'torch', 1e3, 'ms'):>10} | "
          f"{forward['stdlib_ops'] / forward['numpy']:.2f}x")
    for target in ("cpu", "cuda"):
        print(f"{'MLP graph build, ' + target + ': cold / warm':44} | "
              f"{cold[target]:.2f} / {warm[target]:.3f} s")


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        print(json.dumps(child_build()))
    else:
        main()
