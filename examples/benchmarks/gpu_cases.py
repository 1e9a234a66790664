"""The cases of gpu_ops.py: each a `Case` (its inputs' shapes, our expression, a numpy reference, torch's
expression), made by the functions of `CASES` at full size or, with `quick`, at tiny sizes for the emulator.

Full size: matmul in f16, bf16 and f32 from 1024^3 to 8192^3; the transformer's linear layers ([tokens, 768] x
[768, 3072] and [tokens, 3072] x [3072, 768], tokens 512 to 16384); a batched matmul; `gelu(x @ w + b)` (one fused
kernel); examples/mlp.py's MLP at batch 8192; the memory-bound rows (an elementwise add, softmax and log-softmax,
layer norm with and without its weight and bias, RMS norm, group norm, sums over the last and the first axis, a
maximum, a variance and an argmax over the last axis, broadcasts, ResNet-18's pools); attention (prefill, grouped
query, decoding); ResNet-18's convolutions. A new operator is a new function appended to `CASES`. Making a case
draws no data: `Case.arrays` does, when the case runs, so listing and building every case is cheap.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from gpu_peers import triton_matmul  # examples/benchmarks/gpu_peers.py, beside this file

import stdlib_ops as ops


@dataclass
class Case:
    """One row: `name`, the work it does (`flops`, or `bytes` moved for a memory-bound case), the `dtype` of its
    inputs (whose peak applies), their `shapes` (the values are drawn by `arrays`), `ours` (the stdlib_ops
    expression of symbolic inputs), `reference` (numpy, float64) and `torch_fn` (the peers' expression of torch
    tensors); `rtol`: the error allowed, relative to the largest reference value."""

    name: str
    dtype: str
    shapes: list[tuple[int, ...]]
    ours: Callable[..., Any]
    reference: Callable[..., np.ndarray]
    torch_fn: Callable[..., Any]
    rtol: float
    flops: float = 0.0
    bytes: float = 0.0
    triton: Callable[..., Any] | None = None

    def arrays(self) -> list[np.ndarray]:
        """The inputs: uniform values in [-1, 1) of each shape, the same in every process (seeded by the name)."""
        rng = np.random.default_rng(zlib.crc32(self.name.encode()))
        return [rng_array(rng, shape, self.dtype) for shape in self.shapes]


RTOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4}
"""Error allowed against the reference, relative to its largest value: 16-bit outputs are rounded to 2^-11 and
2^-8 of their size and sums of k products round k times in f32 (f32's 2^-24 times a few thousand terms)."""


def rng_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Uniform values in [-1, 1) of `shape`, as `dtype` (bf16 stays f32 here; the devices convert it)."""
    return rng.uniform(-1, 1, shape).astype(np.float32 if dtype == "bfloat16" else dtype)


def matmul_case(name: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str) -> Case:
    """`a @ b` of these shapes."""
    batch = math.prod(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    flops = 2.0 * batch * a_shape[-2] * a_shape[-1] * b_shape[-1]
    return Case(name, dtype, [a_shape, b_shape], lambda x, y: ops.matmul(x, y), lambda x, y: x @ y,
                lambda x, y: x @ y, RTOL[dtype], flops=flops, triton=triton_matmul if len(a_shape) == 2 else None)


def matmul_cases(quick: bool) -> list[Case]:
    """Square matmuls in each dtype."""
    if quick:
        return [matmul_case(f"matmul 67^3 {d}", (67, 67), (67, 67), d) for d in ("float32", "float16")]
    return [matmul_case(f"matmul {s}^3 {d}", (s, s), (s, s), d)
            for d in ("float16", "bfloat16", "float32") for s in (1024, 2048, 4096, 8192)]


def transformer_cases(quick: bool) -> list[Case]:
    """The linear layers of a BERT-base-sized transformer: up and down projections."""
    hidden, inner = (96, 384) if quick else (768, 3072)
    tokens = (48,) if quick else (512, 2048, 8192, 16384)
    dtypes = ("float32",) if quick else ("float16", "float32")
    shapes = ((hidden, inner),) if quick else ((hidden, inner), (inner, hidden))
    return [matmul_case(f"[{t},{k}]x[{k},{n}] {d}", (t, k), (k, n), d)
            for d in dtypes for t in tokens for k, n in shapes]


def batched_cases(quick: bool) -> list[Case]:
    """Batched matmuls of attention's shapes (heads x [seq, 64] x [64, seq])."""
    b, s = (3, 40) if quick else (96, 512)
    dtypes = ("float32",) if quick else ("float16", "float32")
    return [matmul_case(f"bmm [{b},{s},64]x[{b},64,{s}] {d}", (b, s, 64), (b, 64, s), d) for d in dtypes]


def gelu_cases(quick: bool) -> list[Case]:
    """`gelu(x @ w + b)`: one fused kernel of ours."""
    t, k, n = (40, 96, 136) if quick else (8192, 768, 3072)
    cases = []
    for d in (("float32",) if quick else ("float16", "float32")):
        x, w, bias = (t, k), (k, n), (n,)

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


def mlp_cases(quick: bool) -> list[Case]:
    """examples/mlp.py's network (`relu(layer_norm(x @ w1 + b1)) @ w2 + b2`), several kernels a call."""
    t, k, h, n = (24, 32, 48, 16) if quick else (8192, 256, 512, 128)
    d = "float32"
    inputs = [(t, k), (k, h), (h,), (h,), (h,), (h, n), (n,)]

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
    return [Case(f"mlp [{t},{k}]->{h}->{n} {d}", d, inputs, ours, reference, torch_fn, RTOL[d], flops=flops)]


def memory_cases(quick: bool) -> list[Case]:
    """Memory-bound rows: rate in bytes moved (each input read once, the output written once) per second."""
    rows, cols = (64, 256) if quick else (16384, 4096)
    x = y = (rows, cols)
    weight = bias = (cols,)
    size = 4.0 * rows * cols

    def softmax_ref(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def layer_norm_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * w + b

    def rms_norm_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w

    grouped = (2, 64, 8, 16) if quick else (64, 256, 64, 64)  # as many elements as x

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
        Case(f"group_norm 32 groups {list(grouped)} f32", "float32", [grouped],
             lambda a: ops.group_norm(a, 32, eps=1e-5), group_norm_ref, torch_group_norm, 1e-4, bytes=2 * size),
    ]


def elementwise_and_pool_cases(quick: bool) -> list[Case]:
    """Memory-bound element-wise rows with broadcasts, in f32 and f16 (a row vector, a column, a fused chain of
    both), and ResNet-18's pools: rate in bytes moved (each input read once, the output written once)."""
    rows, cols = (64, 256) if quick else (16384, 4096)
    cases = []
    for d in (("float32",) if quick else ("float32", "float16")):
        x, row, column = (rows, cols), (cols,), (rows, 1)
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
        Case(f"max_pool2d 3x3/2 {list(stem)} f32", "float32", [stem], lambda a: ops.max_pool2d(a, 3, 2, 1),
             max_pool_ref, torch_max_pool, 0.0, bytes=4.0 * (math.prod(stem) + pooled)),
        Case(f"adaptive_avg_pool2d 1 {list(features)} f32", "float32", [features],
             lambda a: ops.adaptive_avg_pool2d(a, 1), lambda a: a.mean(axis=(2, 3), keepdims=True),
             torch_adaptive_avg_pool, 1e-5, bytes=4.0 * (math.prod(features) + math.prod(features[:2]))),
    ]


def attention_case(name: str, q_shape: tuple[int, ...], kv_shape: tuple[int, ...], causal: bool,
                   decoding: bool = False) -> Case:
    """f16 scaled dot-product attention of q [B, H, Sq, D] against k and v [B, H_kv, Sk, D] (grouped-query where
    H_kv < H); a decoding case is rated by the bytes of its k/v cache read, the others by their FLOPs (the half
    above the diagonal skipped when causal)."""
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
    return Case(name, "float16", [q_shape, kv_shape, kv_shape],
                lambda q, k, v: ops.attention(q, k, v, causal, enable_gqa=gqa), reference, torch_fn,
                RTOL["float16"], flops=0.0 if decoding else flops,
                bytes=2.0 * (2 * math.prod(q_shape) + 2 * math.prod(kv_shape)) if decoding else 0.0)


def attention_cases(quick: bool) -> list[Case]:
    """Attention: prefill ([8,16,2048,64] and [1,32,8192,128], causal and not), grouped-query (32 query heads, 8
    key/value heads), and decoding (one query a sequence against caches of 1k to 32k keys): a batch of 8 (256
    (batch, head) pairs fill the GPU, one block each) and of 1 (32 pairs: the keys split over blocks, split-k)."""
    if quick:
        return [attention_case("attention causal gqa [1,4,33,64]/2 f16", (1, 4, 33, 64), (1, 2, 33, 64), True),
                attention_case("decode [2,4,1,64] cache 600 f16 (split-k)", (2, 4, 1, 64), (2, 4, 600, 64), False,
                               True)]
    cases = []
    for b, h, s, d in ((8, 16, 2048, 64), (1, 32, 8192, 128)):
        for causal in (False, True):
            cases.append(attention_case(f"attention{' causal' if causal else ''} [{b},{h},{s},{d}] f16",
                                        (b, h, s, d), (b, h, s, d), causal))
    for causal in (False, True):
        cases.append(attention_case(f"attention{' causal' if causal else ''} gqa [4,32,2048,128]/8 f16",
                                    (4, 32, 2048, 128), (4, 8, 2048, 128), causal))
    for batch in (8, 1):
        for cache in (1024, 4096, 16384, 32768):
            cases.append(attention_case(f"decode [{batch},32,1,128] cache {cache} f16", (batch, 32, 1, 128),
                                        (batch, 32, cache, 128), False, True))
            cases.append(attention_case(f"decode gqa [{batch},32,1,128]/8 cache {cache} f16", (batch, 32, 1, 128),
                                        (batch, 8, cache, 128), False, True))
    return cases


# ------------------------------------------------------------------------------------------------ convolutions
RESNET18_CONVS = ((3, 64, 224, 7, 2, 3), (64, 64, 56, 3, 1, 1), (64, 128, 56, 3, 2, 1), (128, 128, 28, 3, 1, 1),
                  (64, 128, 56, 1, 2, 0), (128, 256, 28, 3, 2, 1), (256, 256, 14, 3, 1, 1), (128, 256, 28, 1, 2, 0),
                  (256, 512, 14, 3, 2, 1), (512, 512, 7, 3, 1, 1), (256, 512, 14, 1, 2, 0))
"""ResNet-18's distinct convolutions: (in channels, out channels, input size, kernel, stride, padding)."""


def conv_case(batch: int, channels: int, out_channels: int, size: int, kernel: int, stride: int, padding: int,
              dtype: str, layout: str) -> Case:
    """`conv2d` of a square input without bias, in `layout`: NCHW (weight OIHW), or NHWC (weight OHWI; torch runs
    it on channels-last tensors, cuDNN's NHWC kernels)."""
    nhwc = layout == "NHWC"
    x_shape = (batch, size, size, channels) if nhwc else (batch, channels, size, size)
    w_shape = (out_channels, kernel, kernel, channels) if nhwc else (out_channels, channels, kernel, kernel)
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
    return Case(name, dtype, [x_shape, w_shape],
                lambda x, w: ops.conv2d(x, w, stride=stride, padding=padding, layout=layout), reference, torch_fn,
                RTOL[dtype], flops=flops)


def conv_cases(quick: bool) -> list[Case]:
    """ResNet-18's convolutions at batch 32 in f16, NCHW and NHWC, and a 3x3 convolution of 64 channels at 56 x 56,
    batch 8, in f32 (checked against float64: torch's default TF32 convolution is no reference)."""
    if quick:
        return [conv_case(2, 8, 16, 9, 3, 1, 1, "float16", layout) for layout in ("NCHW", "NHWC")] + \
            [conv_case(2, 5, 6, 9, 3, 2, 1, "float32", "NCHW")]
    return [conv_case(32, *shape, "float16", layout) for layout in ("NCHW", "NHWC")
            for shape in RESNET18_CONVS] + [conv_case(8, 64, 64, 56, 3, 1, 1, "float32", "NCHW")]


CASES = (matmul_cases, transformer_cases, batched_cases, gelu_cases, mlp_cases, memory_cases,
         elementwise_and_pool_cases, attention_cases, conv_cases)


def all_cases(quick: bool) -> list[Case]:
    """Every case of `CASES` in order (names are unique: they select cases and key the rows)."""
    cases = [case for make in CASES for case in make(quick)]
    names = [case.name for case in cases]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"gpu_ops: case names must be unique: {duplicates}")
    return cases
