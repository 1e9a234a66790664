"""What the tuning tests share: a two-point space for the CPU matmul template, a planted template whose extra
point is fast and wrong, a counting executor, and a small traced graph around a matmul with its check.

The planted template is a module-level function of this module, so worker processes resolve it by name too."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

import stdlib_ops as ops
from hidet_lang import attrs, f32, grid, i32, script, script_module
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.templates.kernels.matmul_cpu import matmul_cpu
from stdlib_ops.templates.params import Size
from stdlib_ops.templates.sizes import bind_sizes
from stdlib_ops.templates.space import TuningSpace

SMALL_SPACE = TuningSpace({"kc": (16, 8), "nc": (32,), "min_tiles": (1,)},
                          default={"kc": 16, "nc": 32, "min_tiles": 1})
"""Two points of `matmul_cpu`'s parameters: enough to choose between, quick to compile."""

PLANTED_SPACE = TuningSpace({"kc": (16,), "nc": (32,), "min_tiles": (1,), "fast_but_wrong": (False, True)},
                            default={"kc": 16, "nc": 32, "min_tiles": 1, "fast_but_wrong": False})
"""The space of `planted_matmul`: the default point and one that computes zeros (faster than any matmul)."""


def planted_matmul(batch: Size, m: Size, n: Size, k: Size, dtype: str = "float32", *, kc: int = 16, nc: int = 32,
                   min_tiles: int = 1, fast_but_wrong: bool = False) -> ScriptModule:
    """`matmul_cpu`, or with `fast_but_wrong` a kernel of the same signature that stores zeros (f32 only)."""
    if not fast_but_wrong:
        return matmul_cpu(batch, m, n, k, dtype, kc=kc, nc=nc, min_tiles=min_tiles)
    with script_module() as module:

        @script
        def matmul(batch: i32, m: i32, n: i32, k: i32, a: f32[batch, m, k], b: f32[batch, k, n],
                   c: f32[batch, m, n]):
            attrs.func_kind = "cpu_kernel"
            for t in grid(batch * m * n):
                c[t // (m * n), t // n % m, t % n] = 0.0

    return bind_sizes(module, "matmul", {"batch": batch, "m": m, "n": n, "k": k})


class CountingExecutor(ThreadPoolExecutor):
    """A thread pool that counts the jobs submitted to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def matmul_graph(n: int = 24, k: int = 40) -> ops.FlowGraph:
    """`relu(x @ w)` for `x: f32['rows', k]` and a constant `w: [k, n]`, optimized (one fused kernel)."""
    x = ops.symbol(["rows", k], dtype="float32")
    w = ops.asarray(np.random.default_rng(0).uniform(-1, 1, (k, n)).astype(np.float32))
    return ops.optimize(ops.trace_from(ops.relu(ops.matmul(x, w)), inputs=[x]))


def check_graph(compiled: Any, graph: ops.FlowGraph, rows: int = 5) -> None:
    """`compiled` computes `relu(x @ w)` of `graph` for a random `x` of `rows` rows."""
    x = np.random.default_rng(1).uniform(-1, 1, (rows, graph.inputs[0].shape[1])).astype(np.float32)
    w = graph.constants[0].numpy()
    np.testing.assert_allclose(compiled(x).numpy(), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)
