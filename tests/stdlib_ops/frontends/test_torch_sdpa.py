"""`F.scaled_dot_product_attention` through the torch frontend: one attention operator with every argument (boolean
and float masks, `is_causal`, `scale`, `enable_gqa`), against torch on hypothesis-drawn sizes; a dropout
probability other than 0 refused with the node named; and through `torch.compile` end to end."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from counting_backend import Counting  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch import fx  # noqa: E402

import stdlib_ops as ops  # noqa: E402
from hidet_lang.testing import example_count  # noqa: E402
from stdlib_ops.frontends.torch_fx import from_fx  # noqa: E402

# f32 dot products of at most 12 terms and softmaxes of at most 20 keys, in another order than torch's
TOLERANCE = {"rtol": 2e-5, "atol": 2e-6}
CASES = {
    "plain": {},
    "causal": {"is_causal": True},
    "scale": {"scale": 0.3},
    "bool mask": {"mask": "bool"},
    "float mask, scale": {"mask": "float", "scale": 0.7},
    "gqa, bool mask": {"enable_gqa": True, "mask": "bool"},
    "gqa, causal": {"enable_gqa": True, "is_causal": True},
}


def sdpa_call(case: dict[str, Any]) -> Any:
    """A function of (q, k, v[, mask]) calling SDPA with the case's arguments."""
    options = {key: value for key, value in case.items() if key != "mask"}
    if "mask" in case:
        return lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, **options)
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **options)


SHAPES = {name: shape for name, shape in zip(CASES, [(1, 2, 5, 13, 8, 3), (2, 2, 9, 7, 4, 5), (1, 4, 3, 20, 12, 7),
                                                     (2, 2, 7, 11, 8, 1), (1, 2, 6, 9, 4, 4), (2, 4, 5, 6, 8, 3),
                                                     (1, 4, 9, 9, 12, 5)])}
"""(b, h, sq, sk, d, dv) of each case: odd sizes, Sq != Sk; fixed, so that each case builds its kernel once."""


def draw_inputs(draw: st.DrawFn, name: str) -> list[torch.Tensor]:
    """q [b, h, sq, d], k [b, h_kv, sk, d], v [b, h_kv, sk, dv] (h_kv = h / 2 with enable_gqa) of the case's
    shape, and its mask: boolean [sq, sk] (a drawn row masked whole), or float [b, 1, sq, sk] with -inf entries."""
    case = CASES[name]
    b, heads, sq, sk, d, dv = SHAPES[name]
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    kv_heads = heads // 2 if case.get("enable_gqa") else heads
    tensors = [torch.randn(b, heads, sq, d, generator=gen), torch.randn(b, kv_heads, sk, d, generator=gen),
               torch.randn(b, kv_heads, sk, dv, generator=gen)]
    if case.get("mask") == "bool":
        allowed = torch.rand(sq, sk, generator=gen) < 0.7
        allowed[draw(st.integers(0, sq - 1))] = False
        tensors.append(allowed)
    elif case.get("mask") == "float":
        tensors.append(torch.where(torch.rand(b, 1, sq, sk, generator=gen) < 0.2, -torch.inf,
                                   torch.randn(b, 1, sq, sk, generator=gen)))
    return tensors


def converted(fn: Any, args: list[torch.Tensor]) -> tuple[Counter, np.ndarray]:
    """`fn` traced by FX, converted, optimized and run on the CPU: its operators by name, and the result."""
    graph = ops.optimize(from_fx(fx.symbolic_trace(fn), args).graph)
    out = graph.build("cpu")(*[a.numpy() for a in args])
    return Counter(op.name for op in graph.nodes), (out[0] if isinstance(out, (list, tuple)) else out).numpy()


@pytest.mark.parametrize("name", CASES)
@settings(max_examples=example_count(3), deadline=None)
@given(draw=st.data())
def test_sdpa_converts_to_one_attention_operator(name: str, draw: st.DataObject) -> None:
    case = CASES[name]
    args = draw.draw(st.composite(lambda d: draw_inputs(d, name))())
    fn = sdpa_call(case)
    names, got = converted(fn, args)
    assert names["attention"] == 1 and not names["softmax"] and not names["matmul"], names
    with torch.no_grad():
        want = fn(*args).numpy()
    # torch gives NaN for a query row whose keys are all masked when it is not causal; the operator gives zeros
    dead = np.isnan(want).all(-1, keepdims=True)
    assert (got[np.broadcast_to(dead, got.shape)] == 0).all()
    np.testing.assert_allclose(got, np.where(dead, 0.0, want), **TOLERANCE)


def test_sdpa_with_dropout_is_refused_naming_the_node() -> None:
    q = np.ones((1, 2, 3, 4), np.float32)
    with pytest.raises(ValueError, match=r"node scaled_dot_product_attention .*dropout_p=0.1.*inference"):
        converted(lambda q: F.scaled_dot_product_attention(q, q, q, dropout_p=0.1), [torch.from_numpy(q)])


def test_sdpa_with_a_mask_and_is_causal_is_refused_as_torch_refuses_it() -> None:
    q = torch.ones(1, 2, 3, 4)
    with pytest.raises(ValueError, match=r"node scaled_dot_product_attention .*attn_mask and is_causal"):
        converted(lambda q, m: F.scaled_dot_product_attention(q, q, q, attn_mask=m, is_causal=True),
                  [q, torch.zeros(3, 3)])


def test_sdpa_through_torch_compile() -> None:
    torch._dynamo.reset()
    backend = Counting()
    gen = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(2, 4, 9, 8, generator=gen), torch.randn(2, 2, 11, 8, generator=gen), \
        torch.randn(2, 2, 11, 8, generator=gen)

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.2, enable_gqa=True)

    got = torch.compile(attend, backend=backend)(q, k, v)
    assert backend.graphs == 1
    torch.testing.assert_close(got, attend(q, k, v), **TOLERANCE)
