"""stdlib_ops' CUDA operators side by side with torch (cuBLAS), torch.compile (Inductor) and Triton, on one GPU.

Prints the device and its peaks, then one table row per case: our time in ms, our rate (TFLOP/s for compute-bound
cases, GB/s for memory-bound ones) and its fraction of the device's peak (from `PEAKS`, by the device's name; "?"
for a device not in it), and each peer's time and rate. Every result (ours and each peer's) is checked against a
reference before anything is timed: torch's eager result on the GPU, numpy's in `--quick` mode. A time is the
median of `RUNS` timed loops of about 20 ms each after a warm-up (the loop is timed by synchronizing and reading
`time.perf_counter`, which counts every launch of a loop).

Cases (`CASES`, each a function returning its `Case`s; a new operator is a new function appended there):
matmul in f16, bf16 and f32 from 1024^3 to 8192^3; the transformer's linear layers ([tokens, 768] x [768, 3072]
and [tokens, 3072] x [3072, 768], tokens 512 to 16384); a batched matmul; `gelu(x @ w + b)` as one compiled graph
(one fused kernel); examples/mlp.py's MLP at batch 8192, with our launches replayed as a CUDA graph and launched
one by one; and the memory-bound rows (an elementwise add, softmax and log-softmax, layer norm with and
without its weight and bias, RMS norm, group norm, sums over the last and the first axis, a maximum, a variance
and an argmax over the last axis), whose rate is in GB/s.
Ours is the compiled graph of each case (`ops.trace_from` on symbolic inputs of the case's shapes, `optimize`,
`build('cuda')`) called on device tensors, so our time includes allocating the output.

`--quick` runs tiny sizes on the CUDA emulator (unless HIDET_LANG_CUDA says otherwise) against numpy, with no
peers: a smoke run of the script, not a measurement.

Run: python examples/benchmarks/gpu_ops.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

QUICK = "--quick" in sys.argv
if QUICK:
    os.environ.setdefault("HIDET_LANG_CUDA", "emulator")  # before the runtime loads

from timing import synced_median_time  # noqa: E402 - examples/benchmarks/timing.py, beside this script

import stdlib_ops as ops  # noqa: E402

RUNS = 7
LOOP_S = 0.02

PEAKS: dict[str, dict[str, float]] = {
    "H200": {"float16": 989e12, "bfloat16": 989e12, "float32": 67e12, "bytes": 4.8e12},
    "H100": {"float16": 989e12, "bfloat16": 989e12, "float32": 67e12, "bytes": 3.35e12},
    "A100": {"float16": 312e12, "bfloat16": 312e12, "float32": 19.5e12, "bytes": 2.0e12},
}
"""Dense peaks by device-name fragment: FLOP/s by dtype (tensor cores for f16/bf16, FMA for f32) and the memory's
bytes/s."""


@dataclass
class Case:
    """One row: `name`, the work it does (`flops`, or `bytes` moved for a memory-bound case), the `dtype` whose peak
    applies, the inputs as numpy arrays, `ours` (the stdlib_ops expression of symbolic inputs), `reference` (numpy,
    float64) and `torch_fn` (the peers' expression of torch tensors); `rtol`: the error allowed, relative to the
    largest reference value."""

    name: str
    dtype: str
    inputs: list[np.ndarray]
    ours: Callable[..., Any]
    reference: Callable[..., np.ndarray]
    torch_fn: Callable[..., Any]
    rtol: float
    flops: float = 0.0
    bytes: float = 0.0
    triton: Callable[..., Any] | None = None
    results: dict[str, float | None] = field(default_factory=dict)
    cuda_graphs: bool = True  # whether our compiled graph replays its launches as a captured CUDA graph


RTOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4}
"""Error allowed against the reference, relative to its largest value: 16-bit outputs are rounded to 2^-11 and
2^-8 of their size and sums of k products round k times in f32 (f32's 2^-24 times a few thousand terms)."""


def rng_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Uniform values in [-1, 1) of `shape`, as `dtype` (bf16 stays f32 here; the devices convert it)."""
    return rng.uniform(-1, 1, shape).astype(np.float32 if dtype == "bfloat16" else dtype)


def matmul_case(name: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str,
                rng: np.random.Generator) -> Case:
    """`a @ b` of these shapes."""
    a, b = rng_array(rng, a_shape, dtype), rng_array(rng, b_shape, dtype)
    batch = math.prod(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    flops = 2.0 * batch * a_shape[-2] * a_shape[-1] * b_shape[-1]
    return Case(name, dtype, [a, b], lambda x, y: ops.matmul(x, y), lambda x, y: x @ y,
                lambda x, y: x @ y, RTOL[dtype], flops=flops, triton=triton_matmul if len(a_shape) == 2 else None)


def matmul_cases(quick: bool, rng: np.random.Generator) -> list[Case]:
    """Square matmuls in each dtype."""
    if quick:
        return [matmul_case(f"matmul 67^3 {d}", (67, 67), (67, 67), d, rng) for d in ("float32", "float16")]
    return [matmul_case(f"matmul {s}^3 {d}", (s, s), (s, s), d, rng)
            for d in ("float16", "bfloat16", "float32") for s in (1024, 2048, 4096, 8192)]


def transformer_cases(quick: bool, rng: np.random.Generator) -> list[Case]:
    """The linear layers of a BERT-base-sized transformer: up and down projections."""
    hidden, inner = (96, 384) if quick else (768, 3072)
    tokens = (48,) if quick else (512, 2048, 8192, 16384)
    dtypes = ("float32",) if quick else ("float16", "float32")
    shapes = ((hidden, inner),) if quick else ((hidden, inner), (inner, hidden))
    return [matmul_case(f"[{t},{k}]x[{k},{n}] {d}", (t, k), (k, n), d, rng)
            for d in dtypes for t in tokens for k, n in shapes]


def batched_cases(quick: bool, rng: np.random.Generator) -> list[Case]:
    """Batched matmuls of attention's shapes (heads x [seq, 64] x [64, seq])."""
    b, s = (3, 40) if quick else (96, 512)
    dtypes = ("float32",) if quick else ("float16", "float32")
    return [matmul_case(f"bmm [{b},{s},64]x[{b},64,{s}] {d}", (b, s, 64), (b, 64, s), d, rng) for d in dtypes]


def gelu_cases(quick: bool, rng: np.random.Generator) -> list[Case]:
    """`gelu(x @ w + b)`: one fused kernel of ours."""
    t, k, n = (40, 96, 136) if quick else (8192, 768, 3072)
    cases = []
    for d in (("float32",) if quick else ("float16", "float32")):
        x, w, bias = rng_array(rng, (t, k), d), rng_array(rng, (k, n), d), rng_array(rng, (n,), d)

        def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
            z = x @ w + b
            return 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))

        def torch_fn(x: Any, w: Any, b: Any) -> Any:
            import torch.nn.functional as F

            return F.gelu(x @ w + b)

        cases.append(Case(f"gelu(x@w+b) [{t},{k}]x[{k},{n}] {d}", d, [x, w, bias],
                          lambda x, w, b: ops.gelu(ops.matmul(x, w) + b), reference, torch_fn, RTOL[d],
                          flops=2.0 * t * k * n))
    return cases


def mlp_cases(quick: bool, rng: np.random.Generator) -> list[Case]:
    """examples/mlp.py's network (`relu(layer_norm(x @ w1 + b1)) @ w2 + b2`), several kernels a call: our compiled
    graph with its launches replayed as a CUDA graph, and launched one by one."""
    t, k, h, n = (24, 32, 48, 16) if quick else (8192, 256, 512, 128)
    d = "float32"
    inputs = [rng_array(rng, shape, d) for shape in ((t, k), (k, h), (h,), (h,), (h,), (h, n), (n,))]

    def ours(x: Any, w1: Any, b1: Any, gamma: Any, beta: Any, w2: Any, b2: Any) -> Any:
        hidden = ops.relu(ops.layer_norm(ops.matmul(x, w1) + b1, [h], gamma, beta, eps=1e-5))
        return ops.matmul(hidden, w2) + b2

    def reference(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                  w2: np.ndarray, b2: np.ndarray) -> np.ndarray:
        z = x @ w1 + b1
        z = (z - z.mean(-1, keepdims=True)) / np.sqrt(z.var(-1, keepdims=True) + 1e-5) * gamma + beta
        return np.maximum(z, 0) @ w2 + b2

    def torch_fn(x: Any, w1: Any, b1: Any, gamma: Any, beta: Any, w2: Any, b2: Any) -> Any:
        import torch.nn.functional as F

        return F.relu(F.layer_norm(x @ w1 + b1, [h], gamma, beta, eps=1e-5)) @ w2 + b2

    flops = 2.0 * t * (k * h + h * n)
    return [Case(f"mlp [{t},{k}]->{h}->{n} {d} {label}", d, inputs, ours, reference, torch_fn, RTOL[d],
                 flops=flops, cuda_graphs=graphs)
            for label, graphs in (("cuda graph", True), ("launches", False))]


def memory_cases(quick: bool, rng: np.random.Generator) -> list[Case]:
    """Memory-bound rows: rate in bytes moved (each input read once, the output written once) per second."""
    rows, cols = (64, 256) if quick else (16384, 4096)
    x, y = rng_array(rng, (rows, cols), "float32"), rng_array(rng, (rows, cols), "float32")
    weight, bias = rng_array(rng, (cols,), "float32"), rng_array(rng, (cols,), "float32")
    size = 4.0 * rows * cols

    def softmax_ref(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def layer_norm_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * w + b

    def rms_norm_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w

    grouped = (2, 64, 8, 16) if quick else (16, 256, 64, 64)  # as many elements as x

    def group_norm_ref(x: np.ndarray) -> np.ndarray:
        g = x.reshape(x.shape[0], 32, -1)
        return ((g - g.mean(axis=-1, keepdims=True)) / np.sqrt(g.var(axis=-1, keepdims=True) + 1e-5)).reshape(x.shape)

    def torch_softmax(x: Any) -> Any:
        return x.softmax(dim=-1)

    def torch_plain_layer_norm(x: Any) -> Any:
        import torch.nn.functional as F

        return F.layer_norm(x, (x.shape[-1],), eps=1e-5)

    def torch_rms_norm(x: Any, w: Any) -> Any:
        import torch

        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * w

    def torch_group_norm(x: Any) -> Any:
        import torch.nn.functional as F

        return F.group_norm(x, 32, eps=1e-5)

    def torch_layer_norm(x: Any, w: Any, b: Any) -> Any:
        import torch.nn.functional as F

        return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)

    return [
        Case(f"add [{rows},{cols}] f32", "float32", [x, y], lambda a, b: a + b, lambda a, b: a + b,
             lambda a, b: a + b, 1e-6, bytes=3 * size),
        Case(f"softmax [{rows},{cols}] f32", "float32", [x], lambda a: ops.softmax(a, axis=-1), softmax_ref,
             torch_softmax, 1e-5, bytes=2 * size),
        Case(f"layer_norm [{rows},{cols}] f32", "float32", [x, weight, bias],
             lambda a, w, b: ops.layer_norm(a, weight=w, bias=b, eps=1e-5), layer_norm_ref, torch_layer_norm, 1e-4,
             bytes=2 * size),
        Case(f"layer_norm no affine [{rows},{cols}] f32", "float32", [x], lambda a: ops.layer_norm(a, eps=1e-5),
             lambda a: layer_norm_ref(a, 1.0, 0.0), torch_plain_layer_norm, 1e-4, bytes=2 * size),
        Case(f"rms_norm [{rows},{cols}] f32", "float32", [x, weight], lambda a, w: ops.rms_norm(a, weight=w, eps=1e-6),
             rms_norm_ref, torch_rms_norm, 1e-4, bytes=2 * size),
        Case(f"log_softmax [{rows},{cols}] f32", "float32", [x], lambda a: ops.log_softmax(a, axis=-1),
             lambda a: np.log(softmax_ref(a)), lambda a: a.log_softmax(dim=-1), 1e-5, bytes=2 * size),
        Case(f"sum axis -1 [{rows},{cols}] f32", "float32", [x], lambda a: ops.sum(a, axis=-1),
             lambda a: a.sum(-1), lambda a: a.sum(dim=-1), 1e-5, bytes=size),
        Case(f"sum axis 0 [{rows},{cols}] f32", "float32", [x], lambda a: ops.sum(a, axis=0),
             lambda a: a.sum(0), lambda a: a.sum(dim=0), 1e-5, bytes=size),
        Case(f"max axis -1 [{rows},{cols}] f32", "float32", [x], lambda a: ops.max(a, axis=-1),
             lambda a: a.max(-1), lambda a: a.amax(dim=-1), 0.0, bytes=size),
        Case(f"var axis -1 [{rows},{cols}] f32", "float32", [x], lambda a: ops.var(a, axis=-1),
             lambda a: a.var(-1), lambda a: a.var(dim=-1, correction=0), 1e-5, bytes=size),
        Case(f"argmax axis -1 [{rows},{cols}] f32", "float32", [x], lambda a: ops.argmax(a, axis=-1),
             lambda a: a.argmax(-1), lambda a: a.argmax(dim=-1), 0.0, bytes=size),
        Case(f"group_norm 32 groups {list(grouped)} f32", "float32", [x.reshape(grouped)],
             lambda a: ops.group_norm(a, 32, eps=1e-5), group_norm_ref, torch_group_norm, 1e-4, bytes=2 * size),
    ]


def elementwise_and_pool_cases(quick: bool, rng: np.random.Generator) -> list[Case]:
    """Memory-bound element-wise rows with broadcasts, in f32 and f16 (a row vector, a column, a fused chain of
    both), and ResNet-18's pools: rate in bytes moved (each input read once, the output written once)."""
    rows, cols = (64, 256) if quick else (16384, 4096)
    cases = []
    for d in (("float32",) if quick else ("float32", "float16")):
        x, row, column = rng_array(rng, (rows, cols), d), rng_array(rng, (cols,), d), rng_array(rng, (rows, 1), d)
        size = float(np.dtype(d).itemsize * rows * cols)
        short = "f32" if d == "float32" else "f16"
        cases += [
            Case(f"x + row [{rows},{cols}] {short}", d, [x, row], lambda a, b: a + b, lambda a, b: a + b,
                 lambda a, b: a + b, RTOL[d], bytes=2 * size),
            Case(f"x * column [{rows},{cols}] {short}", d, [x, column], lambda a, c: a * c, lambda a, c: a * c,
                 lambda a, c: a * c, RTOL[d], bytes=2 * size),
            Case(f"relu(x * column + row) [{rows},{cols}] {short}", d, [x, column, row],
                 lambda a, c, b: ops.relu(a * c + b), lambda a, c, b: np.maximum(a * c + b, 0),
                 lambda a, c, b: (a * c + b).relu(), RTOL[d], bytes=2 * size),
        ]
    stem = (2, 8, 16, 16) if quick else (64, 64, 112, 112)  # ResNet-18's stem pool input at batch 64
    features = (2, 16, 7, 7) if quick else (64, 512, 7, 7)  # and its last feature map
    images, maps = rng_array(rng, stem, "float32"), rng_array(rng, features, "float32")
    pooled = math.prod(stem[:2]) * ((stem[2] - 1) // 2 + 1) * ((stem[3] - 1) // 2 + 1)

    def max_pool_ref(x: np.ndarray) -> np.ndarray:
        n, c, h, w = x.shape
        padded = np.full((n, c, h + 2, w + 2), -np.inf, x.dtype)
        padded[:, :, 1:-1, 1:-1] = x
        oh, ow = (h - 1) // 2 + 1, (w - 1) // 2 + 1
        return np.max([padded[:, :, dy:dy + 2 * oh:2, dx:dx + 2 * ow:2] for dy in range(3) for dx in range(3)], axis=0)

    def torch_max_pool(x: Any) -> Any:
        import torch.nn.functional as F

        return F.max_pool2d(x, 3, 2, 1)

    def torch_adaptive_avg_pool(x: Any) -> Any:
        import torch.nn.functional as F

        return F.adaptive_avg_pool2d(x, 1)

    return cases + [
        Case(f"max_pool2d 3x3/2 {list(stem)} f32", "float32", [images], lambda a: ops.max_pool2d(a, 3, 2, 1),
             max_pool_ref, torch_max_pool, 0.0, bytes=4.0 * (images.size + pooled)),
        Case(f"adaptive_avg_pool2d 1 {list(features)} f32", "float32", [maps],
             lambda a: ops.adaptive_avg_pool2d(a, 1), lambda a: a.mean(axis=(2, 3), keepdims=True),
             torch_adaptive_avg_pool, 1e-5, bytes=4.0 * (maps.size + math.prod(features[:2]))),
    ]


def attention_case(name: str, q_shape: tuple[int, ...], kv_shape: tuple[int, ...], causal: bool,
                   rng: np.random.Generator, decoding: bool = False) -> Case:
    """f16 scaled dot-product attention of q [B, H, Sq, D] against k and v [B, H_kv, Sk, D] (grouped-query where
    H_kv < H); a decoding case is rated by the bytes of its k/v cache read, the others by their FLOPs (the half
    above the diagonal skipped when causal)."""
    q, k, v = rng_array(rng, q_shape, "float16"), rng_array(rng, kv_shape, "float16"), rng_array(rng, kv_shape,
                                                                                                 "float16")
    gqa = kv_shape[1] != q_shape[1]
    b, h, sq, d = q_shape
    sk = kv_shape[2]

    def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        group = q.shape[1] // k.shape[1]
        out = np.empty(q.shape)
        for i in range(b):
            for j in range(h):
                s = q[i, j] @ k[i, j // group].T / math.sqrt(d)
                if causal:
                    s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
                e = np.exp(s - s.max(-1, keepdims=True))
                out[i, j] = e / e.sum(-1, keepdims=True) @ v[i, j // group]
        return out

    def torch_fn(q: Any, k: Any, v: Any) -> Any:
        import torch.nn.functional as F

        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

    flops = 4.0 * b * h * sq * sk * d * (0.5 if causal and sq == sk else 1.0)
    return Case(name, "float16", [q, k, v], lambda q, k, v: ops.attention(q, k, v, causal, enable_gqa=gqa),
                reference, torch_fn, RTOL["float16"], flops=0.0 if decoding else flops,
                bytes=2.0 * (q.size + k.size + v.size + q.size) if decoding else 0.0)


def attention_cases(quick: bool, rng: np.random.Generator) -> list[Case]:
    """Attention: prefill ([8,16,2048,64] and [1,32,8192,128], causal and not), grouped-query (32 query heads, 8
    key/value heads), and decoding (one query a sequence against caches of 1k to 32k keys): a batch of 8 (256
    (batch, head) pairs fill the GPU, one block each) and of 1 (32 pairs: the keys split over blocks, split-k)."""
    if quick:
        return [attention_case("attention causal gqa [1,4,33,64]/2 f16", (1, 4, 33, 64), (1, 2, 33, 64), True, rng),
                attention_case("decode [2,4,1,64] cache 600 f16 (split-k)", (2, 4, 1, 64), (2, 4, 600, 64), False, rng,
                               True)]
    cases = []
    for b, h, s, d in ((8, 16, 2048, 64), (1, 32, 8192, 128)):
        for causal in (False, True):
            cases.append(attention_case(f"attention{' causal' if causal else ''} [{b},{h},{s},{d}] f16",
                                        (b, h, s, d), (b, h, s, d), causal, rng))
    for causal in (False, True):
        cases.append(attention_case(f"attention{' causal' if causal else ''} gqa [4,32,2048,128]/8 f16",
                                    (4, 32, 2048, 128), (4, 8, 2048, 128), causal, rng))
    for batch in (8, 1):
        for cache in (1024, 4096, 16384, 32768):
            cases.append(attention_case(f"decode [{batch},32,1,128] cache {cache} f16", (batch, 32, 1, 128),
                                        (batch, 32, cache, 128), False, rng, True))
            cases.append(attention_case(f"decode gqa [{batch},32,1,128]/8 cache {cache} f16", (batch, 32, 1, 128),
                                        (batch, 8, cache, 128), False, rng, True))
    return cases


# ------------------------------------------------------------------------------------------------ convolutions
RESNET18_CONVS = ((3, 64, 224, 7, 2, 3), (64, 64, 56, 3, 1, 1), (64, 128, 56, 3, 2, 1), (128, 128, 28, 3, 1, 1),
                  (64, 128, 56, 1, 2, 0), (128, 256, 28, 3, 2, 1), (256, 256, 14, 3, 1, 1), (128, 256, 28, 1, 2, 0),
                  (256, 512, 14, 3, 2, 1), (512, 512, 7, 3, 1, 1), (256, 512, 14, 1, 2, 0))
"""ResNet-18's distinct convolutions: (in channels, out channels, input size, kernel, stride, padding)."""


def conv_case(batch: int, channels: int, out_channels: int, size: int, kernel: int, stride: int, padding: int,
              dtype: str, layout: str, rng: np.random.Generator) -> Case:
    """`conv2d` of a square input without bias, in `layout`: NCHW (weight OIHW), or NHWC (weight OHWI; torch runs
    it on channels-last tensors, cuDNN's NHWC kernels)."""
    nhwc = layout == "NHWC"
    x_shape = (batch, size, size, channels) if nhwc else (batch, channels, size, size)
    w_shape = (out_channels, kernel, kernel, channels) if nhwc else (out_channels, channels, kernel, kernel)
    x, w = rng_array(rng, x_shape, dtype), rng_array(rng, w_shape, dtype)
    out = (size + 2 * padding - kernel) // stride + 1
    flops = 2.0 * batch * out_channels * out * out * channels * kernel * kernel

    def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        if nhwc:
            x, w = x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2)
        xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
        result = np.zeros((batch, out_channels, out, out))
        for ky in range(kernel):
            for kx in range(kernel):
                window = xp[:, :, ky:ky + stride * (out - 1) + 1:stride, kx:kx + stride * (out - 1) + 1:stride]
                result += np.einsum("nchw,oc->nohw", window, w[:, :, ky, kx])
        return result.transpose(0, 2, 3, 1) if nhwc else result

    def torch_fn(x: Any, w: Any) -> Any:
        import torch
        import torch.nn.functional as F

        if not nhwc:
            return F.conv2d(x, w, stride=stride, padding=padding)
        channels_last = torch.channels_last
        y = F.conv2d(x.permute(0, 3, 1, 2).contiguous(memory_format=channels_last),
                     w.permute(0, 3, 1, 2).contiguous(memory_format=channels_last), stride=stride, padding=padding)
        return y.permute(0, 2, 3, 1)

    name = f"conv2d {layout} [{batch},{channels},{size},{size}] {out_channels}x{kernel}x{kernel}/{stride} " \
           f"{'f16' if dtype == 'float16' else 'f32'}"
    return Case(name, dtype, [x, w], lambda x, w: ops.conv2d(x, w, stride=stride, padding=padding, layout=layout),
                reference, torch_fn, RTOL[dtype], flops=flops)


def conv_cases(quick: bool, rng: np.random.Generator) -> list[Case]:
    """ResNet-18's convolutions at batch 32 in f16, NCHW and NHWC, and a 3x3 convolution of 64 channels at 56 x 56,
    batch 8, in f32 (checked against float64: torch's default TF32 convolution is no reference)."""
    if quick:
        return [conv_case(2, 8, 16, 9, 3, 1, 1, "float16", layout, rng) for layout in ("NCHW", "NHWC")] + \
            [conv_case(2, 5, 6, 9, 3, 2, 1, "float32", "NCHW", rng)]
    return [conv_case(32, *shape, "float16", layout, rng) for layout in ("NCHW", "NHWC")
            for shape in RESNET18_CONVS] + [conv_case(8, 64, 64, 56, 3, 1, 1, "float32", "NCHW", rng)]


CASES = (matmul_cases, transformer_cases, batched_cases, gelu_cases, mlp_cases, memory_cases,
         elementwise_and_pool_cases, attention_cases, conv_cases)


# ------------------------------------------------------------------------------------------------ the contenders
def compile_ours(case: Case) -> Callable[..., Any]:
    """Our compiled graph of the case, for its inputs' shapes."""
    symbols = [ops.symbol(list(a.shape), dtype=case.dtype) for a in case.inputs]
    graph = ops.optimize(ops.trace_from(case.ours(*symbols), inputs=symbols))
    compiled = graph.build(target="cuda")
    compiled.cuda_graphs = case.cuda_graphs
    return compiled


def triton_matmul(a: Any, b: Any) -> Any:
    """A blocked Triton matmul (f32 accumulation, output in the inputs' dtype): the classic kernel, one
    configuration of 128 x 128 x 32 tiles, 4 warps, 3 stages."""
    import torch
    import triton

    kernel = _triton_kernel()
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(m, 128) * triton.cdiv(n, 128),)
    kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0), BM=128, BN=128, BK=32, num_warps=4,
                 num_stages=3)
    return c


_TRITON: list[Any] = []


def _triton_kernel() -> Any:
    """The Triton kernel, defined on first use (Triton is optional)."""
    if _TRITON:
        return _TRITON[0]
    import triton
    import triton.language as tl

    @triton.jit
    def tiled_matmul(a, b, c, m, n, k, lda, ldb, ldc, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid = tl.program_id(0)
        tiles_n = tl.cdiv(n, BN)
        rows = (pid // tiles_n) * BM + tl.arange(0, BM)
        cols = (pid % tiles_n) * BN + tl.arange(0, BN)
        depth = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, k, BK):
            x = tl.load(a + rows[:, None] * lda + (k0 + depth)[None, :],
                        mask=(rows[:, None] < m) & ((k0 + depth)[None, :] < k), other=0.0)
            y = tl.load(b + (k0 + depth)[:, None] * ldb + cols[None, :],
                        mask=((k0 + depth)[:, None] < k) & (cols[None, :] < n), other=0.0)
            acc += tl.dot(x, y, allow_tf32=False)
        tl.store(c + rows[:, None] * ldc + cols[None, :], acc.to(c.dtype.element_ty),
                 mask=(rows[:, None] < m) & (cols[None, :] < n))

    _TRITON.append(tiled_matmul)
    return tiled_matmul


def to_numpy(value: Any) -> np.ndarray:
    """A result (ours, a torch tensor, numpy) as a float64 numpy array."""
    if isinstance(value, (list, tuple)):
        value = value[0]
    if hasattr(value, "detach"):
        return value.detach().float().cpu().numpy().astype(np.float64)
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value, dtype=np.float64)


def check(case: Case, who: str, value: Any, expected: np.ndarray) -> None:
    """Raise if `value` is off `expected` by more than the case allows."""
    got = to_numpy(value)
    scale = float(np.abs(expected).max()) or 1.0
    err = float(np.abs(got - expected).max()) if got.shape == expected.shape else math.inf
    if not err <= case.rtol * scale:
        raise AssertionError(f"{case.name}: {who}'s result is off by {err:.3g} (allowed {case.rtol * scale:.3g})")


# ------------------------------------------------------------------------------------------------ the table
def device_name(torch: Any) -> str:
    """The GPU's name (torch's report), or what runs our kernels without one."""
    if torch is not None:
        return torch.cuda.get_device_name()
    return f"CUDA emulator ({os.environ.get('HIDET_LANG_CUDA', 'auto')})"


def peak_of(device: str, key: str) -> float | None:
    """The device's peak for `key` (a dtype, or 'bytes') from `PEAKS`, None when unknown."""
    for fragment, peaks in PEAKS.items():
        if fragment in device:
            return peaks.get(key)
    return None


def peers_of(torch: Any) -> dict[str, Callable[[Case], Callable[..., Any] | None]]:
    """The peers that are installed: each gives a case's function of torch tensors (None where it has none)."""
    if torch is None:
        return {}
    peers: dict[str, Callable[[Case], Callable[..., Any] | None]] = {
        "torch": lambda case: case.torch_fn,
        "torch.compile": lambda case: torch.compile(case.torch_fn, dynamic=False),
    }
    try:
        import triton  # noqa: F401

        peers["triton"] = lambda case: case.triton
    except ImportError:
        pass
    return peers


def run_case(case: Case, device: str, torch: Any, peers: dict[str, Callable[[Case], Any]], quick: bool) -> str:
    """Check and time every contender of `case`; its row of the table."""
    from codegen.runtime import cuda_driver

    gpu = torch is not None
    sync: Callable[[], None] = (lambda: torch.cuda.synchronize()) if gpu else (lambda: None)
    if gpu:
        args = [torch.from_numpy(a).cuda().to(getattr(torch, case.dtype)) for a in case.inputs]
        expected = to_numpy(case.torch_fn(*[x.double() for x in args]))
        ours_args: list[Any] = args
        sync = lambda: (torch.cuda.synchronize(), cuda_driver.synchronize())  # noqa: E731
    else:
        expected = case.reference(*[a.astype(np.float64) for a in case.inputs])
        ours_args = [ops.asarray(a, device="cuda") for a in case.inputs]
    compiled = compile_ours(case)
    check(case, "ours", compiled(*ours_args), expected)
    fns: dict[str, Callable[[], Any]] = {"ours": lambda: compiled(*ours_args)}
    for name, make in peers.items():
        fn = make(case)
        if fn is not None:
            check(case, name, fn(*args), expected)
            fns[name] = (lambda f: lambda: f(*args))(fn)
    work = case.flops or case.bytes
    scale = 1e12 if case.flops else 1e9
    peak = peak_of(device, case.dtype if case.flops else "bytes")
    cells = [f"{case.name:<40}"]
    for name in ("ours", *peers):
        if name not in fns:
            cells.append(f"{'-':>22}")
            continue
        seconds = synced_median_time(fns[name], sync, 2 if quick else RUNS, 0 if quick else LOOP_S)
        rate = work / seconds
        share = f"{100 * rate / peak:5.1f}%" if peak else "    ?"
        cells.append(f"{seconds * 1e3:9.3f} ms {rate / scale:7.1f} {share}")
    return "  ".join(cells)


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes on the emulator, no peers (a smoke run)")
    quick = parser.parse_args().quick
    torch = None
    if not quick:
        import torch as torch_module

        if not torch_module.cuda.is_available():
            raise SystemExit("gpu_ops.py needs a CUDA GPU and torch with CUDA (or --quick for a smoke run)")
        torch = torch_module
        torch.backends.cuda.matmul.allow_tf32 = False  # f32 against f32 (TF32 is a separate, opt-in path)
    device = device_name(torch)
    peers = peers_of(torch)
    peaks = {key: peak_of(device, key) for key in ("float16", "float32", "bytes")}
    print(f"device: {device}; peaks: " + ", ".join(
        f"{key} {'?' if v is None else (f'{v / 1e12:.0f} TFLOP/s' if key != 'bytes' else f'{v / 1e9:.0f} GB/s')}"
        for key, v in peaks.items()))
    print("each cell: median time, rate (TFLOP/s, or GB/s for memory-bound rows), % of the device's peak")
    print(f"{'case':<40}  " + "  ".join(f"{name:>22}" for name in ("ours", *peers)))
    rng = np.random.default_rng(0)
    for make_cases in CASES:
        for case in make_cases(quick, rng):
            print(run_case(case, device, torch, peers, quick), flush=True)
    print("every result matched its reference first")


if __name__ == "__main__":
    main()
