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
