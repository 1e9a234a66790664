"""`attention` against numpy: scaled dot-product over the last two axes, causal or not, Sq != Sk, broadcast
batch axes, f16 with f32 accumulation; one task named "attention"; on cpu and cuda."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from operator_cases import DEVICES, SETTINGS, assert_ulps, data, run

import stdlib_ops as ops


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


# (q, k, v shapes, causal): Sq != Sk, a single query, broadcast batch axes, Dv != D, odd sizes
CASES = [((2, 7, 8), (2, 9, 8), (2, 9, 8), True), ((1, 3, 1, 8), (2, 1, 33, 8), (1, 33, 5), False),
         ((5, 16), (5, 16), (5, 16), False), ((1, 7, 3), (1, 7, 3), (1, 7, 1), True)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
@SETTINGS
@given(st.data())
def test_attention(device: str, case: tuple, draw: st.DataObject) -> None:
    *shapes, causal = case
    q, k, v = (draw.draw(data(s, -2, 2)) for s in shapes)
    got = run(ops.attention, q, k, v, device=device, causal=causal)
    # dot products of D <= 16 values up to 2 (error D * u * 4 * D before exp, relative after it), a softmax over
    # up to 33 keys and a weighted sum of values up to 2: a few 1e-6 absolute
    assert_ulps(got, attention_reference(q, k, v, causal), 16, 4e-6)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(q=data((2, 7, 16), -2, 2, "float16"), k=data((2, 9, 16), -2, 2, "float16"), v=data((2, 9, 16), -2, 2, "float16"))
def test_attention_f16(device: str, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    got = run(ops.attention, q, k, v, device=device, causal=True)
    assert got.dtype == np.float16
    # accumulated in f32 (error ~1e-6), rounded once to f16: one f16 ulp of results up to 2 (2**-9), plus the
    # f16 rounding of probabilities a template may make before multiplying by v (|v| <= 2, 2**-11 each)
    assert_ulps(got, attention_reference(q, k, v, True), 2, 2.0**-9)


def test_attention_is_one_task_with_the_contract_template_authors_rely_on() -> None:
    q, k, v = ops.symbol(["b", 7, 8]), ops.symbol(["b", 9, 8]), ops.symbol(["b", 9, 4])
    out = ops.attention(q, k, v, causal=True)
    task = out.producer.task
    assert out.shape == ("b", 7, 4)
    assert task.name == "attention" and task.attrs == {"causal": True}
    assert [t.shape for t in out.producer.inputs] == [("b", 7, 8), ("b", 9, 8), ("b", 9, 4)]
    assert not task.is_injective


def test_more_heads_than_a_grid_dimension_other_than_x_holds() -> None:
    """65537 head batches: more blocks than CUDA allows in grid y or z (65535), all in grid x."""
    q = np.random.default_rng(0).standard_normal((65537, 1, 8)).astype(np.float32)
    got = ops.attention(*(ops.asarray(x, device="cuda") for x in (q, q, q))).numpy()
    np.testing.assert_array_equal(got, q)  # one key: softmax is exactly 1, the output the value itself


def sdpa_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, mask: np.ndarray | None,
                   scale: float, group: int) -> np.ndarray:
    """torch's `scaled_dot_product_attention` in float64: key/value head h // group for query head h (axis -3),
    an additive mask, and zeros for rows whose every score is -inf."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = s + mask
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isinf(top), 0.0, top))
    total = e.sum(-1, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0) @ v


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
@SETTINGS
@given(q=data((2, 4, 5, 8), -2, 2), k=data((2, 2, 7, 8), -2, 2), v=data((2, 2, 7, 3), -2, 2),
       mask=data((4, 1, 7), -2, 2), dead=st.integers(0, 3))
def test_attention_with_grouped_heads_a_mask_and_a_scale(device: str, causal: bool, q: np.ndarray, k: np.ndarray,
                                                          v: np.ndarray, mask: np.ndarray, dead: int) -> None:
    """Two query heads a key/value head, a float mask broadcast over the batch and the queries with -inf entries
    (one head's row masked entirely: zeros, as torch gives), scale 0.3."""
    mask = mask.copy()
    mask[:, :, ::3] = -np.inf
    mask[dead] = -np.inf
    q_, k_, v_, mask_ = (ops.asarray(x, device=device) for x in (q, k, v, mask))
    got = ops.attention(q_, k_, v_, causal, attn_mask=mask_, scale=0.3, enable_gqa=True).numpy()
    # as test_attention: dot products of 8 values up to 2 and softmaxes over 7 keys, a few 1e-6 absolute
    assert_ulps(got, sdpa_reference(q, k, v, causal, mask, 0.3, 2), 16, 4e-6)
    assert not got[:, dead].any()


def test_a_boolean_mask_allows_the_keys_where_it_is_true() -> None:
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((3, 6, 8)).astype(np.float32) for _ in range(3))
    allowed = rng.random((6, 6)) < 0.7
    allowed[2] = False
    got = ops.attention(*(ops.asarray(x) for x in (q, k, v)), attn_mask=ops.asarray(allowed)).numpy()
    expected = sdpa_reference(q, k, v, False, np.where(allowed, 0.0, -np.inf), 1 / np.sqrt(8), 1)
    assert_ulps(got, expected, 16, 4e-6)


def test_attention_refuses_what_it_cannot_broadcast_or_group() -> None:
    q, k = ops.symbol([2, 6, 5, 8]), ops.symbol([2, 4, 7, 8])
    with pytest.raises(ValueError, match="multiple of the key/value heads"):
        ops.attention(q, k, k, enable_gqa=True)
    with pytest.raises(ValueError, match="attn_mask of shape"):
        ops.attention(q, q, q, attn_mask=ops.symbol([3, 5, 5]))
    with pytest.raises(TypeError, match="boolean or floating-point"):
        ops.attention(q, q, q, attn_mask=ops.symbol([5, 5], dtype="int32"))
