"""The fused attention template against a float64 numpy reference, on the emulator's checking mode (no race, no
out-of-bounds access, no uninitialized shared-memory read): symbolic sequence lengths (one build serves every
length), causal and not, and half precision."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import data, sizes

from hidet_lang.testing import example_count
from stdlib_ops.templates.kernels.attention_cuda import attention_cuda
from stdlib_ops.templates.params import ScheduleError

U = 2.0**-24  # f32's unit roundoff
HEAD_DIM = 16


@cache
def built(*args, **kwargs):
    return attention_cuda(*args, **kwargs).build(check=True)


def assert_attention_close(o: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool,
                           extra_rtol: float = 0.0) -> None:
    """`o` within f32's error of attention(q, k, v).

    A score (a dot product of head_dim terms) is off by (head_dim + 2) * 2^-24 of the sum of the terms' sizes;
    exp turns a score's error, and the rounding of the shift by the running maximum, into relative error of a
    weight; the weights' sum and the weighted sum of v add seq_k * 2^-24, and each tile's rescaling a rounding.
    All of it is relative to sum_j p_j |v_j|."""
    q64, k64, v64 = (t.astype(np.float64) for t in (q, k, v))
    d, seq_q, seq_k = q.shape[-1], q.shape[1], k.shape[1]
    scale = 1 / np.sqrt(d)
    visible = np.ones((seq_q, seq_k), bool)
    if causal:
        visible = np.arange(seq_k)[None, :] <= np.arange(seq_q)[:, None]
    scores = np.where(visible, q64 @ k64.transpose(0, 2, 1) * scale, -np.inf)
    shifted = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(shifted)
    p /= p.sum(axis=-1, keepdims=True)
    expected = p @ v64
    score_error = (d + 2) * U * (np.abs(q64) @ np.abs(k64).transpose(0, 2, 1)).max(axis=-1, keepdims=True) * scale
    shift_error = 2 * U * np.where(visible, np.abs(shifted), 0).max(axis=-1, keepdims=True)
    relative = 2 * score_error + shift_error + (seq_k + d + seq_k // 32 + 8) * U + extra_rtol
    bound = 2 * relative * (p @ np.abs(v64)) + 1e-30
    err = np.abs(o - expected)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert (err <= bound).all(), f"{o[worst]} != {expected[worst]} at {worst} (bound {bound[worst]})"


@pytest.mark.parametrize("causal", [False, True])
@settings(max_examples=example_count(6), deadline=None)
@given(st.data())
def test_symbolic_lengths_match_numpy(causal: bool, draw: st.DataObject) -> None:
    bh, seq_q, seq_k = draw.draw(sizes(3)), draw.draw(sizes(96)), draw.draw(sizes(96))
    q = data(draw.draw, (bh, seq_q, HEAD_DIM), scale=2.0)
    k = data(draw.draw, (bh, seq_k, HEAD_DIM), scale=2.0)
    v = data(draw.draw, (bh, seq_k, HEAD_DIM))
    o = np.full_like(q, np.nan)
    built("bh", "sq", "sk", HEAD_DIM, causal)(bh, seq_q, seq_k, q, k, v, o)
    assert_attention_close(o, q, k, v, causal)


@settings(max_examples=example_count(3), deadline=None)
@given(st.data())
def test_half_precision_computes_in_f32(draw: st.DataObject) -> None:
    seq = draw.draw(sizes(40))
    q, k, v = (data(draw.draw, (2, seq, 8), "float16") for _ in range(3))
    o = np.zeros_like(q)
    built(2, "seq", "seq", 8, True, "float16", block_q=32, block_k=16)(seq, q, k, v, o)
    # f32 arithmetic as above, then one rounding to f16 (2^-11 relative)
    assert_attention_close(o.astype(np.float32), q, k, v, causal=True, extra_rtol=2.0**-11)


def test_schedule_parameters_it_cannot_honour_are_refused() -> None:
    with pytest.raises(ScheduleError, match="head_dim must be an int"):
        attention_cuda(1, 8, 8, "d")
    with pytest.raises(ScheduleError, match="block_q must be whole warps"):
        attention_cuda(1, 8, 8, 16, block_q=48)
    with pytest.raises(ScheduleError, match="bytes of shared memory"):
        attention_cuda(1, 8, 8, 256, block_k=32)
