"""The CPU attention template against float64 numpy, for each vector width the machine has (key tiles of 64, 32
and 16 keys), through builds with symbolic sizes: hypothesis-drawn head batches and sequence lengths that cross
query and key tiles, causal or not, additive masks with -inf entries and rows masked whole (zeros, as torch
gives), head and value dimensions that are not whole vectors, f16 storage; then through `ops.attention` (the
template chosen on the CPU) with grouped heads, broadcast masks and a scale.

Errors are bounded by what f32 arithmetic allows: a score sums `head_dim` products (off by head_dim * 2^-24 of the
sum of their magnitudes, which moves its weight by as much relative), the online softmax rescales each output by
one exp per key tile, and the output sums weighted values (off by seq_k * 2^-24 of the sum of their magnitudes)."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdlib_ops as ops
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.templates.cpu_lanes import machine_has_lanes, machine_lanes
from stdlib_ops.templates.kernels.attention_cpu import attention_cpu
from stdlib_ops.templates.registry import choose_schedule

U = 2.0**-24
HEAD_DIM, VALUE_DIM = 24, 40  # neither a whole number of 16-lane vectors
SETTINGS = settings(max_examples=example_count(4), deadline=None)


def widths(*lanes: int) -> list[object]:
    """`lanes` as test parameters, each skipped where the machine lacks its vector type."""
    return [pytest.param(n, marks=pytest.mark.skipif(not machine_has_lanes(n), reason=f"no {n}-lane vectors here"))
            for n in lanes]


@cache
def built(lanes: int, causal: bool, masked: bool, dtype: str = "float32", block_q: int = 8) -> object:
    """The template with symbolic head batch and sequence lengths (small query tiles: several a drawn case)."""
    return attention_cpu("bh", "sq", "sk", HEAD_DIM, VALUE_DIM, causal, dtype, scale=0.3,
                         mask_dtype="float32" if masked else None, lanes=lanes, block_q=block_q).build()


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool,
              mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """softmax(q k^T * scale + mask) v in float64 (rows with every key masked: zeros), and the bound of f32's error
    for each output (see the module docstring)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) * scale
    magnitude = np.abs(q) @ np.abs(np.swapaxes(k, -1, -2)) * abs(scale)
    if mask is not None:
        scores = scores + mask
    if causal:
        sq, sk = scores.shape[-2:]
        scores = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None], scores, -np.inf)
    top = scores.max(-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isneginf(top), 0.0, top))
    total = weights.sum(-1, keepdims=True)
    safe = np.where(total > 0, total, 1.0)
    out = np.where(total > 0, weights @ v / safe, 0.0)
    sk = k.shape[-2]
    # each weight off by its score's error (head_dim + 4 roundings of the magnitude) plus a few ulps of exp and
    # the rescalings; each output by that share of |v| and seq_k roundings of the weighted sum
    score_error = (HEAD_DIM + 4) * U * magnitude + 8 * U
    bound = (weights * score_error) @ np.abs(v) / safe * 2 + (sk + 8) * U * (weights @ np.abs(v)) / safe
    return out, np.where(total > 0, bound, 0.0) + 1e-30


def draw_case(draw: st.DrawFn, masked: bool, dtype: str = "float32") -> tuple[np.ndarray, ...]:
    """q, k, v (values in [-2, 2], exact in `dtype`) and with `masked` a float mask of values in [-3, 3], about
    one in six -inf, and a drawn set of query rows masked whole."""
    bh, sq, sk = draw(st.integers(1, 3)), draw(st.integers(1, 70)), draw(st.integers(1, 70))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def tensor(*shape: int) -> np.ndarray:
        return rng.uniform(-2, 2, shape).astype(dtype)

    q, k, v = tensor(bh, sq, HEAD_DIM), tensor(bh, sk, HEAD_DIM), tensor(bh, sk, VALUE_DIM)
    if not masked:
        return q, k, v, None
    mask = rng.uniform(-3, 3, (bh, sq, sk)).astype(np.float32)
    mask[rng.random(mask.shape) < 1 / 6] = -np.inf
    mask[:, rng.random(sq) < 0.2, :] = -np.inf
    return q, k, v, mask


@pytest.mark.parametrize("lanes", widths(16, 8, 4))
@pytest.mark.parametrize("causal, masked", [(False, False), (True, False), (False, True), (True, True)])
@SETTINGS
@given(data=st.data())
def test_attention_cpu_matches_float64(lanes: int, causal: bool, masked: bool, data: st.DataObject) -> None:
    q, k, v, mask = data.draw(st.composite(lambda draw: draw_case(draw, masked))())
    bh, sq, sk = q.shape[0], q.shape[1], k.shape[1]
    out = np.full((bh, sq, VALUE_DIM), np.nan, np.float32)
    built(lanes, causal, masked)(bh, sq, sk, q, k, v, *([mask] if masked else []), out)
    expected, bound = reference(q, k, v, 0.3, causal, mask)
    assert (np.abs(out - expected) <= bound).all(), np.abs(out - expected).max()
    if masked:  # rows masked whole are exactly zero
        dead = np.isneginf(mask).all(-1)
        assert (out[dead] == 0.0).all()


@pytest.mark.skipif(machine_lanes() is None, reason="no vector fused multiply-add here")
@settings(max_examples=example_count(2), deadline=None)
@given(data=st.data())
def test_attention_cpu_f16_storage(data: st.DataObject) -> None:
    q, k, v, _ = data.draw(st.composite(lambda draw: draw_case(draw, False, "float16"))())
    bh, sq, sk = q.shape[0], q.shape[1], k.shape[1]
    out = np.zeros((bh, sq, VALUE_DIM), np.float16)
    built(machine_lanes(), True, False, "float16")(bh, sq, sk, q, k, v, out)
    expected, bound = reference(q, k, v, 0.3, True, None)
    # the f32 result rounded to f16 once more: half an ulp of f16 (2^-11 relative)
    assert (np.abs(out - expected) <= bound + 2.0**-11 * np.abs(expected) + 2.0**-25).all()


@pytest.mark.skipif(machine_lanes() is None, reason="no vector fused multiply-add here")
@pytest.mark.parametrize("causal", [False, True])
def test_ops_attention_on_the_cpu_takes_the_template_with_groups_masks_and_scale(causal: bool) -> None:
    rng = np.random.default_rng(5)
    q = rng.uniform(-2, 2, (2, 4, 67, 16)).astype(np.float32)
    k = rng.uniform(-2, 2, (2, 2, 45, 16)).astype(np.float32)
    v = rng.uniform(-2, 2, (2, 2, 45, 20)).astype(np.float32)
    allowed = rng.random((67, 45)) < 0.7
    allowed[3] = False  # a query row that sees no key
    out = ops.attention(*(ops.asarray(x) for x in (q, k, v)), causal, attn_mask=ops.asarray(allowed), scale=0.25,
                        enable_gqa=True)
    expected, bound = reference(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1), 0.25, causal,
                                np.where(allowed, 0.0, -np.inf))
    got = out.numpy()
    assert (np.abs(got - expected) <= bound).all(), np.abs(got - expected).max()
    assert (got[:, :, 3] == 0.0).all()


@pytest.mark.skipif(machine_lanes() is None, reason="no vector fused multiply-add here")
def test_the_cpu_template_is_chosen_for_attention_graphs() -> None:
    qs, ks, vs = ops.symbol(["b", 4, "s", 32]), ops.symbol(["b", 4, "s", 32]), ops.symbol(["b", 4, "s", 32])
    out = ops.attention(qs, ks, vs, True, scale=1 / math.sqrt(8))
    assert choose_schedule(out.producer.task, Target.of("cpu")).key.endswith("attention_cpu:attention_cpu")
    compiled = ops.optimize(ops.trace_from(out, [qs, ks, vs])).build("cpu")
    assert len(compiled.kernels) == 1
