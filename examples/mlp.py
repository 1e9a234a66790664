"""A two-layer MLP with layer norm, as a graph of stdlib_ops operators: traced from a symbolic batch, optimized
(fusion), printed, compiled for the CPU and for CUDA (a GPU, or the CUDA emulator without one), run at two batch
sizes with one build, and checked against numpy.

    python examples/mlp.py
"""

from __future__ import annotations

import time

import numpy as np

import stdlib_ops as ops

IN_FEATURES, HIDDEN, OUT_FEATURES = 256, 512, 128


def make_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The MLP's parameters, scaled as a trained network's would be (unit-variance activations)."""
    return {
        "w1": (rng.standard_normal((IN_FEATURES, HIDDEN)) / np.sqrt(IN_FEATURES)).astype(np.float32),
        "b1": (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "gamma": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "beta": (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "w2": (rng.standard_normal((HIDDEN, OUT_FEATURES)) / np.sqrt(HIDDEN)).astype(np.float32),
        "b2": (0.1 * rng.standard_normal(OUT_FEATURES)).astype(np.float32),
    }


def mlp(x: ops.Tensor, p: dict[str, ops.Tensor]) -> ops.Tensor:
    """relu(layer_norm(x @ w1 + b1)) @ w2 + b2."""
    h = ops.matmul(x, p["w1"]) + p["b1"]
    h = ops.relu(ops.layer_norm(h, [HIDDEN], p["gamma"], p["beta"], eps=1e-5))
    return ops.matmul(h, p["w2"]) + p["b2"]


def reference(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """The same network in numpy (float64)."""
    h = x.astype(np.float64) @ p["w1"] + p["b1"]
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5) * p["gamma"] + p["beta"]
    return np.maximum(h, 0) @ p["w2"] + p["b2"]


def main() -> None:
    rng = np.random.default_rng(0)
    weights = make_weights(rng)
    params = {name: ops.asarray(value) for name, value in weights.items()}
    x = ops.symbol(["batch", IN_FEATURES], dtype="float32")
    graph = ops.optimize(ops.trace_from(mlp(x, params), inputs=[x]))
    print(graph, end="\n\n")
    for target in ("cpu", "cuda"):
        start = time.perf_counter()
        compiled = graph.build(target=target)
        build_seconds = time.perf_counter() - start
        print(f"{target}: built in {build_seconds:.2f} s, {len(compiled.kernels)} kernels per call: "
              f"{', '.join(compiled.kernels)}")
        for batch in (3, 64):
            inputs = rng.standard_normal((batch, IN_FEATURES)).astype(np.float32)
            out = compiled(inputs).numpy()
            expected = reference(inputs, weights)
            # f32 sums of 256 and 512 terms of unit-size values, through a normalization: a few 1e-6 relative
            np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-4)
            print(f"  batch {batch:3d}: output {out.shape}, max |error| vs numpy "
                  f"{np.abs(out - expected).max():.2e}")
    print("the MLP matches numpy on cpu and cuda at batch 3 and 64")


if __name__ == "__main__":
    main()
