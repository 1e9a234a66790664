"""`fuse_attention` (run by `optimize`): attention spelled out in operators becomes one attention operator, in FX
traces of hand-written attention (matmul or bmm against a transpose, a division by sqrt(d) or a multiplication,
an additive mask) and in ONNX exports of a BERT-style attention block by both of torch's exporters; and the
graph is left alone wherever the operators compute something else (softmax over another axis, an intermediate
read elsewhere, a mask that widens the scores, a scale that is not a constant). Every compiled graph is checked
against torch, on fixed and hypothesis-drawn sizes."""

from __future__ import annotations

import io
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

import torch.nn.functional as F  # noqa: E402
from torch import fx  # noqa: E402

import stdlib_ops as ops  # noqa: E402
from hidet_lang.testing import example_count  # noqa: E402
from stdlib_ops.frontends.torch_backend import hidet_lang_backend  # noqa: E402
from stdlib_ops.frontends.torch_fx import from_fx  # noqa: E402
from stdlib_ops.graph.flow_graph import FlowGraph  # noqa: E402

D = 8
SCALE = 1 / math.sqrt(D)
# f32 dot products of D terms and softmaxes of at most 13 keys, in another order than torch's: a few 1e-7
TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


def operators(graph: FlowGraph) -> Counter:
    """How many operators of each name `graph` has."""
    return Counter(op.name for op in graph.nodes)


def shapes(batch: int = 2, heads: int = 3, sq: int = 5, sk: int = 13, dv: int = 6) -> list[torch.Tensor]:
    """q, k, v and an additive mask of -inf and finite values (one query row masked whole)."""
    gen = torch.Generator().manual_seed(batch * 100 + sq)
    q = torch.randn(batch, heads, sq, D, generator=gen)
    k = torch.randn(batch, heads, sk, D, generator=gen)
    v = torch.randn(batch, heads, sk, dv, generator=gen)
    mask = torch.where(torch.rand(batch, 1, sq, sk, generator=gen) < 0.2, -math.inf, 0.5)
    mask[:, :, 1] = -math.inf
    return [q, k, v, mask]


def compiled_fx(fn: Callable[..., Any], args: list[torch.Tensor]) -> tuple[FlowGraph, np.ndarray]:
    """`fn` traced by FX, converted, optimized, built for the CPU and run on `args`: the optimized graph and the
    result."""
    gm = fx.symbolic_trace(fn)
    graph = ops.optimize(from_fx(gm, args).graph)
    out = graph.build("cpu")(*[a.numpy() for a in args])
    return graph, (out[0] if isinstance(out, (list, tuple)) else out).numpy()


def bert_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(-1, -2)) / 2.8284271247461903
    return torch.matmul(F.softmax(scores + mask, dim=-1), v)


def scaled_by_mul(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    scores = 0.25 * torch.matmul(q, k.permute(0, 1, 3, 2))
    return torch.matmul(torch.softmax(mask + scores, -1), v)


def batched_without_mask(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    q3, k3, v3 = (t.flatten(0, 1) for t in (q, k, v))
    return torch.bmm(torch.softmax(torch.bmm(q3, k3.transpose(1, 2)) * 0.3, dim=2), v3)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("fn", [bert_attention, scaled_by_mul, batched_without_mask, sdpa])
def test_traced_attention_becomes_one_operator(fn: Callable[..., torch.Tensor]) -> None:
    args = shapes()
    graph, got = compiled_fx(fn, args)
    names = operators(graph)
    assert names["attention"] == 1 and not names["softmax"] and not names["matmul"], names
    want = fn(*args).numpy()
    got = got.reshape(want.shape)
    if fn is not batched_without_mask:  # query row 1 sees no key: zeros, as SDPA gives (softmax alone: NaN)
        assert (got[:, :, 1] == 0).all() and (np.isnan(want[:, :, 1]).all() or (want[:, :, 1] == 0).all())
        want[:, :, 1] = 0.0
    np.testing.assert_allclose(got, want, **TOLERANCE)


@settings(max_examples=example_count(3), deadline=None)
@given(batch=st.integers(1, 2), heads=st.integers(1, 3), sq=st.integers(2, 9), sk=st.integers(1, 20),
       dv=st.integers(1, 7))
def test_traced_attention_of_drawn_sizes_becomes_one_operator(batch: int, heads: int, sq: int, sk: int,
                                                              dv: int) -> None:
    args = shapes(batch, heads, sq, sk, dv)
    graph, got = compiled_fx(bert_attention, args)
    assert operators(graph)["attention"] == 1
    want = bert_attention(*args).numpy()
    dead = np.isnan(want).all(-1, keepdims=True)  # rows masked whole: zeros (softmax alone: NaN)
    assert dead[:, :, 1].all() and (got[np.broadcast_to(dead, got.shape)] == 0).all()
    np.testing.assert_allclose(got, np.where(dead, 0.0, want), **TOLERANCE)


def softmax_over_queries(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.matmul(F.softmax(torch.matmul(q, k.transpose(-1, -2)) * SCALE, dim=-2), v)


def scores_read_twice(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(-1, -2)) * SCALE
    return torch.matmul(F.softmax(scores, dim=-1), v) + scores.sum(-1, keepdim=True)


def widening_mask(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(q[0], k[0].transpose(-1, -2)) * SCALE  # [heads, sq, sk] + [batch, 1, sq, sk]
    return torch.matmul(F.softmax(scores + mask.clamp(min=-1e4), dim=-1), v[0])


def scale_not_constant(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(-1, -2)) * q[..., :1]
    return torch.matmul(F.softmax(scores, dim=-1), v)


@pytest.mark.parametrize("fn", [softmax_over_queries, scores_read_twice, widening_mask, scale_not_constant])
def test_other_computations_are_left_alone(fn: Callable[..., torch.Tensor]) -> None:
    args = shapes()
    graph, got = compiled_fx(fn, args)
    names = operators(graph)
    assert not names["attention"] and names["softmax"] == 1, names
    np.testing.assert_allclose(got, fn(*args).numpy(), **TOLERANCE)


class AttentionBlock(torch.nn.Module):
    """BERT's self-attention: projections, heads split, scaled scores plus the padding mask, heads merged."""

    def __init__(self, hidden: int = 16, heads: int = 2) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.heads, self.head_dim = heads, hidden // heads
        self.q, self.k, self.v = (torch.nn.Linear(hidden, hidden) for _ in range(3))

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.heads, self.head_dim).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores + (1.0 - padding[:, None, None, :]) * -10000.0
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return out.transpose(1, 2).reshape(b, s, -1)


class SdpaBlock(AttentionBlock):
    """The same block through `scaled_dot_product_attention` with a boolean mask."""

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = (p(x).view(b, s, self.heads, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=padding[:, None, None, :] > 0.5)
        return out.transpose(1, 2).reshape(b, s, -1)


def exported(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], dynamo: bool) -> bytes:
    buffer = io.BytesIO()
    with torch.no_grad():
        if dynamo:
            pytest.importorskip("onnxscript")
            torch.onnx.export(model, inputs, dynamo=True, verbose=False).save(buffer)
        else:
            torch.onnx.export(model, inputs, buffer, dynamo=False, opset_version=17)
    return buffer.getvalue()


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("block, dynamo", [(AttentionBlock, False), (SdpaBlock, True)])
def test_exported_attention_blocks_compile_to_one_attention_operator(block: type, dynamo: bool) -> None:
    model = block().eval()
    x = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(1))
    padding = torch.ones(2, 7)
    padding[1, 5:] = 0.0
    graph = ops.optimize(ops.from_onnx(onnx.load_from_string(exported(model, (x, padding), dynamo))))
    names = operators(graph)
    assert names["attention"] == 1 and not names["softmax"], names
    out = graph.build("cpu")(x.numpy(), padding.numpy())
    got = (out[0] if isinstance(out, (list, tuple)) else out).numpy()
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x, padding).numpy(), **TOLERANCE)


class Gpt2Attention(torch.nn.Module):
    """GPT-2's attention as HF writes it: a constant lower-triangular boolean buffer sliced to
    `[:, :, Sk - Sq : Sk, :Sk]`, the scores divided by a 0-d constant, `where(causal, scores, finfo.min)`, the
    padding mask added. `forward(x, mask, past)`: queries of the `x` positions against keys and values of `past`
    and `x` (a cache: Sq < Sk, the buffer's slice then aligned at the bottom right, not the operator's causal)."""

    def __init__(self, hidden: int = 16, heads: int = 2, positions: int = 16) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.heads, self.head_dim = heads, hidden // heads
        lower = torch.tril(torch.ones((positions, positions), dtype=torch.bool))
        self.register_buffer("bias", lower.view(1, 1, positions, positions), persistent=False)
        self.c_attn = torch.nn.Linear(hidden, 3 * hidden)
        self.c_proj = torch.nn.Linear(hidden, hidden)

    def heads_of(self, t: torch.Tensor) -> torch.Tensor:
        return t.view(t.shape[0], t.shape[1], self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, past: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.c_attn(x).split(h, dim=2)
        if past.shape[1]:
            _, k_past, v_past = self.c_attn(past).split(h, dim=2)
            k, v = torch.cat([k_past, k], dim=1), torch.cat([v_past, v], dim=1)
        q, k, v = self.heads_of(q), self.heads_of(k), self.heads_of(v)
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        query_length, key_length = q.size(-2), k.size(-2)
        causal = self.bias[:, :, key_length - query_length: key_length, :key_length]
        fill = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device)
        w = torch.where(causal, w.to(w.dtype), fill)
        w = torch.softmax(w + mask, dim=-1).type(v.dtype)
        out = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous().view(b, s, h)
        return self.c_proj(out)


def gpt2_inputs(batch: int, new: int, cached: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [batch, new, 16], HF's additive padding mask [batch, 1, 1, cached + new] (finfo.min on the last two keys
    of the last sequence: right padding, every query keeps key 0) and the cached positions [batch, cached, 16]."""
    gen = torch.Generator().manual_seed(batch * 31 + new + cached)
    x, past = torch.randn(batch, new, 16, generator=gen), torch.randn(batch, cached, 16, generator=gen)
    mask = torch.zeros(batch, 1, 1, cached + new)
    if cached + new > 2:
        mask[-1, ..., -2:] = torch.finfo(torch.float32).min
    return x, mask, past


class Counting:
    """The torch.compile backend, counting the graphs it compiles and keeping the last compiled callable."""

    def __init__(self) -> None:
        self.graphs = 0
        self.last: Any = None

    def __call__(self, gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        self.graphs += 1
        self.last = hidet_lang_backend(gm, example_inputs, **kwargs)
        return self.last


@pytest.mark.parametrize("batch, new, cached", [(2, 7, 0), (1, 4, 9)])
def test_gpt2_attention_through_torch_compile_is_one_attention_kernel(batch: int, new: int, cached: int) -> None:
    torch._dynamo.reset()
    backend = Counting()
    model = Gpt2Attention().eval()
    inputs = gpt2_inputs(batch, new, cached)
    with torch.no_grad():
        got = torch.compile(model, backend=backend)(*inputs)
        want = model(*inputs)
    assert backend.graphs == 1
    kernels = backend.last.kernels
    assert sum("attention*" in k for k in kernels) == 1 and not any("softmax" in k for k in kernels), kernels
    np.testing.assert_allclose(got.numpy(), want.numpy(), **TOLERANCE)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("batch, new, cached", [(2, 7, 0), (2, 3, 5)])
def test_gpt2_attention_exported_to_onnx_is_one_attention_operator(batch: int, new: int, cached: int) -> None:
    """Without a cache the sliced buffer is the lower triangle: a causal operator with the padding mask alone;
    with one (Sq < Sk) it is not the operator's causal mask and joins the padding mask."""
    model = Gpt2Attention().eval()
    inputs = gpt2_inputs(batch, new, cached)
    graph = ops.optimize(ops.from_onnx(onnx.load_from_string(exported(model, inputs, False))))
    names = operators(graph)
    assert names["attention"] == 1 and not names["softmax"], names
    (op,) = [op for op in graph.nodes if op.name == "attention"]
    assert op.task.attrs["causal"] is (cached == 0) and len(op.inputs) == 4
    assert names["where"] == (1 if cached else 0)  # the condition, where not causal, hides keys in the mask
    out = graph.build("cpu")(*[t.numpy() for t in inputs[:3 if cached else 2]])  # an empty cache is not an input
    got = (out[0] if isinstance(out, (list, tuple)) else out).numpy()
    with torch.no_grad():
        np.testing.assert_allclose(got, model(*inputs).numpy(), **TOLERANCE)


def where_masked(fill: float, keep: bool, lower: bool) -> Callable[..., torch.Tensor]:
    """Attention with scores hidden by a constant boolean condition through `where`: the lower triangle, or a
    random pattern that hides every key of query 3; `keep`: `where(allowed, scores, fill)`, else
    `where(hidden, fill, scores)`."""
    allowed = torch.rand(5, 13, generator=torch.Generator().manual_seed(2)) < 0.7
    allowed[3] = False
    allowed = torch.tril(torch.ones(5, 13, dtype=torch.bool)) if lower else allowed

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-1, -2)) * SCALE
        scores = torch.where(allowed, scores, fill) if keep else torch.where(~allowed, fill, scores)
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    return fn


@pytest.mark.parametrize("fill, keep, lower", [(-math.inf, True, True), (-math.inf, True, False),
                                               (torch.finfo(torch.float32).min, False, False)])
def test_where_of_a_constant_condition_becomes_causal_or_a_mask(fill: float, keep: bool, lower: bool) -> None:
    """The lower triangle: a causal operator without a mask; another pattern: a mask. A row hidden whole gives
    zeros, as SDPA does (softmax alone: NaN for a fill of -inf, the mean of v for finfo.min)."""
    args = shapes()
    fn = where_masked(fill, keep, lower)
    graph, got = compiled_fx(fn, args)
    names = operators(graph)
    assert names["attention"] == 1 and not names["softmax"] and not names["where"], names
    (op,) = [op for op in graph.nodes if op.name == "attention"]
    assert op.task.attrs["causal"] is lower and len(op.inputs) == (3 if lower else 4)
    want = fn(*args).numpy()
    if not lower:
        assert (got[:, :, 3] == 0).all()
        want[:, :, 3] = 0.0
    np.testing.assert_allclose(got, want, **TOLERANCE)


def test_where_with_a_fill_that_does_not_hide_is_left_alone() -> None:
    args = shapes()

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lower = torch.tril(torch.ones(5, 13, dtype=torch.bool))
        scores = torch.where(lower, torch.matmul(q, k.transpose(-1, -2)), -5.0)
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    graph, got = compiled_fx(fn, args)
    assert not operators(graph)["attention"]
    np.testing.assert_allclose(got, fn(*args).numpy(), **TOLERANCE)


@pytest.mark.parametrize("boolean", [True, False])
def test_fully_masked_rows_are_zeros_as_sdpa_gives_on_every_path(boolean: bool) -> None:
    """A query whose every key is masked (a boolean mask False, or a float mask -inf, across the row): torch's SDPA
    gives zeros, and so do the CPU template (f32), split-k decoding on the tensor cores (f16, a long cache; the
    tensor-core template's own fully masked rows are its tests'), the rule-based CUDA kernel (f32, which no CUDA
    template takes with a mask) and the rewrite of the spelled-out attention; the other rows agree with SDPA."""
    gen = torch.Generator().manual_seed(4)
    q = torch.randn(1, 2, 3, 32, generator=gen).half().float()
    k, v = (torch.randn(1, 2, 600, 32, generator=gen).half().float() for _ in range(2))
    allowed = torch.rand(1, 2, 3, 600, generator=gen) < 0.6
    allowed[:, :, 1] = False
    mask = allowed if boolean else torch.where(allowed, 0.0, -math.inf)
    for keys, device, dtype in ((600, "cpu", "float32"), (600, "cuda", "float16"), (40, "cuda", "float32")):
        kk, vv, mm = k[:, :, :keys], v[:, :, :keys], mask[..., :keys]
        want = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mm).numpy()
        assert not want[:, :, 1].any()
        args = [ops.asarray(t.numpy().astype(dtype), device=device) for t in (q, kk, vv)]
        got = ops.attention(*args, attn_mask=ops.asarray(mm.numpy(), device=device)).numpy().astype(np.float32)
        assert not got[:, :, 1].any(), (keys, device, dtype)
        # f16 rounds the probabilities and the output (2^-11 each, of outputs below 1)
        np.testing.assert_allclose(got, want, **(TOLERANCE if dtype == "float32" else {"atol": 2e-3}))

    def spelled_out(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-1, -2)) * SCALE
        scores = torch.where(mask, scores, -math.inf) if boolean else scores + mask
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    small = [q[..., :D], k[:, :, :40, :D], v[:, :, :40], mask[..., :40]]
    graph, got = compiled_fx(spelled_out, small)
    assert operators(graph)["attention"] == 1 and not got[:, :, 1].any()
    np.testing.assert_allclose(got, F.scaled_dot_product_attention(*small[:3], attn_mask=small[3], scale=SCALE),
                               **TOLERANCE)
