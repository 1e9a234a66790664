"""Plain DSL kernels, as a user first writes them, built strict and with fast math, beside numpy and torch.

Each kernel is the obvious loop nest with no intrinsics and no tuning: a row-wise softmax, a layer norm, an
elementwise chain `gelu(x * a + b)`, a row sum, and the i-k-j matmul. Each is built twice from the same source,
`module.build()` (strict: the default) and `module.build(fast_math=True)`, and timed beside numpy and torch
(two threads each, in one process); every result is checked against numpy first (strict kernels to a few units
in the last place, fast-math ones to a relative 1e-4 after reassociation and the vector math functions).
The contenders take turns (examples/benchmarks/timing.py): a time is the median of 21 loops of about 10 ms.

The table gives each time in ms and, for the peers, the ratio peer time / our fast-math time (above 1: ours is
faster); `fast/strict` is how much fast math gains.

Run: python examples/benchmarks/user_kernels.py (`--quick`: small sizes, each timed once: a smoke run)
"""

from __future__ import annotations

from timing import prepare_process  # examples/benchmarks/timing.py, beside this script

THREADS = 2
prepare_process(THREADS, main=__name__ == "__main__")  # before numpy and the kernels load

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402
from timing import in_turns  # noqa: E402 - examples/benchmarks/timing.py, beside this script

import hidet_lang as hidet  # noqa: E402
from hidet_lang import attrs, f32, grid  # noqa: E402

RUNS = 21


@dataclass
class Case:
    """One kernel: its module, its arguments (the output last), and numpy's and torch's versions (None: none)."""

    name: str
    module: object
    args: list[np.ndarray]
    numpy: Callable[[], np.ndarray] | None
    torch: Callable[[], object] | None
    reference: np.ndarray


def softmax_module(m: int, n: int) -> object:
    """y[i, :] = softmax(x[i, :]), three passes over the row."""
    with hidet.script_module() as module:

        @hidet.script
        def softmax(x: f32[m, n], y: f32[m, n]):
            attrs.func_kind = "public"
            for i in grid(m, attrs="p"):
                row_max: f32 = x[i, 0]
                for j in range(n):
                    row_max = max(row_max, x[i, j])
                total: f32 = 0.0
                for j in range(n):
                    e = math.exp(x[i, j] - row_max)
                    y[i, j] = e
                    total += e
                for j in range(n):
                    y[i, j] = y[i, j] / total

    return module


def layer_norm_module(m: int, n: int) -> object:
    """y[i, :] = (x[i, :] - mean) / sqrt(var + 1e-5) * gamma + beta."""
    with hidet.script_module() as module:

        @hidet.script
        def layer_norm(x: f32[m, n], gamma: f32[n], beta: f32[n], y: f32[m, n]):
            attrs.func_kind = "public"
            for i in grid(m, attrs="p"):
                mean: f32 = 0.0
                for j in range(n):
                    mean += x[i, j]
                mean = mean / n
                var: f32 = 0.0
                for j in range(n):
                    d = x[i, j] - mean
                    var += d * d
                rstd = 1.0 / math.sqrt(var / n + 1e-5)
                for j in range(n):
                    y[i, j] = (x[i, j] - mean) * rstd * gamma[j] + beta[j]

    return module


def gelu_module(m: int, n: int) -> object:
    """y = gelu(x * a + b) with a and b per column (erf's GELU)."""
    with hidet.script_module() as module:

        @hidet.script
        def gelu_chain(x: f32[m, n], a: f32[n], b: f32[n], y: f32[m, n]):
            attrs.func_kind = "public"
            for i, j in grid(m, n, attrs="p."):
                v = x[i, j] * a[j] + b[j]
                y[i, j] = 0.5 * v * (1.0 + math.erf(v * 0.7071067811865476))

    return module


def row_sum_module(m: int, n: int) -> object:
    """y[i] = sum of x[i, :]."""
    with hidet.script_module() as module:

        @hidet.script
        def row_sum(x: f32[m, n], y: f32[m]):
            attrs.func_kind = "public"
            for i in grid(m, attrs="p"):
                total: f32 = 0.0
                for j in range(n):
                    total += x[i, j]
                y[i] = total

    return module


def matmul_module(n: int) -> object:
    """c = a @ b, the i-k-j loop order (the inner loop runs along rows of b and c)."""
    with hidet.script_module() as module:

        @hidet.script
        def matmul(a: f32[n, n], b: f32[n, n], c: f32[n, n]):
            attrs.func_kind = "public"
            for i in grid(n, attrs="p"):
                for j in range(n):
                    c[i, j] = 0.0
                for k in range(n):
                    a_ik = a[i, k]
                    for j in range(n):
                        c[i, j] += a_ik * b[k, j]

    return module


def numpy_erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 through math.erf, for the reference only (numpy has no erf)."""
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def cases(torch: object | None, quick: bool) -> list[Case]:
    """The kernels with their data, references and peers (torch's None where torch is not installed)."""
    rng = np.random.default_rng(0)
    m, n, size = (64, 100, 64) if quick else (4096, 1024, 512)
    x = rng.standard_normal((m, n), dtype=np.float32)
    gamma, beta = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    a, b = rng.standard_normal((size, size), dtype=np.float32), rng.standard_normal((size, size), dtype=np.float32)
    t = (lambda array: torch.from_numpy(array)) if torch is not None else None
    x64 = x.astype(np.float64)

    def numpy_softmax() -> np.ndarray:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def numpy_layer_norm() -> np.ndarray:
        mean = x.mean(axis=1, keepdims=True)
        return (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * gamma + beta

    softmax_ref = np.exp(x64 - x64.max(axis=1, keepdims=True))
    softmax_ref /= softmax_ref.sum(axis=1, keepdims=True)
    mean64 = x64.mean(axis=1, keepdims=True)
    norm_ref = (x64 - mean64) / np.sqrt(x64.var(axis=1, keepdims=True) + 1e-5) * gamma + beta
    v = x64 * gamma + beta
    gelu_ref = 0.5 * v * (1.0 + numpy_erf(v / math.sqrt(2.0)))
    tf = torch.nn.functional if torch is not None else None
    return [
        Case("softmax", softmax_module(m, n), [x, np.empty_like(x)], numpy_softmax,
             (lambda: tf.softmax(t(x), dim=1)) if torch else None, softmax_ref),
        Case("layer norm", layer_norm_module(m, n), [x, gamma, beta, np.empty_like(x)], numpy_layer_norm,
             (lambda: tf.layer_norm(t(x), (n,), t(gamma), t(beta), 1e-5)) if torch else None, norm_ref),
        Case("gelu(x * a + b)", gelu_module(m, n), [x, gamma, beta, np.empty_like(x)], None,
             (lambda: tf.gelu(t(x) * t(gamma) + t(beta))) if torch else None, gelu_ref),
        Case("row sum", row_sum_module(m, n), [x, np.empty(m, np.float32)], lambda: x.sum(axis=1),
             (lambda: t(x).sum(dim=1)) if torch else None, x64.sum(axis=1)),
        Case(f"matmul i-k-j {size}", matmul_module(size), [a, b, np.empty_like(a)], lambda: a @ b,
             (lambda: t(a) @ t(b)) if torch else None, a.astype(np.float64) @ b),
    ]


def checked(case: Case, built: object, fast: bool) -> Callable[[], object]:
    """A call of `built` on the case's arguments, after checking its result against the float64 reference: to
    a few float32 roundings of the result's magnitude (strict), to a relative 1e-4 of it (fast math)."""

    def run() -> object:
        return built(*case.args)

    run()
    out, ref = case.args[-1], case.reference
    scale = np.abs(ref).max() + 1e-30
    bound = (1e-4 if fast else 2e-5) * scale * (case.args[0].shape[-1] ** 0.5 if case.name.startswith(("row", "mat"))
                                                else 1.0)
    error = float(np.abs(out - ref).max())
    if not error <= bound:
        raise AssertionError(f"{case.name} ({'fast math' if fast else 'strict'}): max error {error:.3g} > {bound:.3g}")
    return run


def peer_checked(case: Case, fn: Callable[[], object], name: str) -> Callable[[], object]:
    """`fn` after checking its result against the reference as loosely as a library's own float32 reduction order
    allows (relative 1e-4)."""
    result = np.asarray(fn())
    bound = 1e-4 * (np.abs(case.reference).max() + 1e-30) * math.sqrt(case.args[0].shape[-1])
    error = float(np.abs(result - case.reference).max())
    if not error <= bound:
        raise AssertionError(f"{case.name}: {name}'s max error {error:.3g} > {bound:.3g}")
    return fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats (a smoke run)")
    quick = parser.parse_args().quick
    try:
        import torch

        torch.set_num_threads(THREADS)
    except ImportError:
        torch = None
    runs = 1 if quick else RUNS
    print(f"{THREADS} threads each; ms per call (median of {runs} loops); peers as peer time / our fast-math time")
    header = f"{'kernel':<18} {'strict':>9} {'fast math':>10} {'fast/strict':>12} {'numpy':>16} {'torch':>16}"
    print(header)
    print("-" * len(header))
    for case in cases(torch, quick):
        contenders = {"strict": checked(case, case.module.build(), fast=False),
                      "fast": checked(case, case.module.build(fast_math=True), fast=True)}
        for name, fn in (("numpy", case.numpy), ("torch", case.torch)):
            if fn is not None:
                contenders[name] = peer_checked(case, fn, name)
        samples = in_turns(contenders, runs)
        times = {name: statistics.median(values) * 1e3 for name, values in samples.items()}
        fast = times["fast"]
        peers = [f"{times[p]:8.2f} ({times[p] / fast:4.2f})" if p in times else "-" for p in ("numpy", "torch")]
        print(f"{case.name:<18} {times['strict']:9.2f} {fast:10.2f} {times['strict'] / fast:11.2f}x "
              f"{peers[0]:>16} {peers[1]:>16}")
    print("every result matched numpy first")


if __name__ == "__main__":
    main()
