"""Template views: flat indices unravel as numpy's `unravel_index` (symbolic dimensions included), products and
broadcast batch indices are numpy's, and binding refuses a template that uses a tensor other than by element
accesses."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32
from hidet_lang.ir.evaluate import evaluate
from hidet_lang.ir.expr import Var, convert
from hidet_lang.ir.types import int32
from hidet_lang.testing import example_count
from stdlib_ops.compute import compute, tensor_input
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.templates.views import View, bind_template, broadcast_batch, product, unravel

DIMS = st.lists(st.sampled_from([1, 2, 3, 7]), min_size=0, max_size=4)


@settings(max_examples=example_count(60), deadline=None)
@given(dims=DIMS, symbolic=st.lists(st.booleans(), min_size=4, max_size=4), data=st.data())
def test_unravel_is_numpys_unravel_index(dims: list[int], symbolic: list[bool], data: st.DataObject) -> None:
    env = {}
    shape = []
    for n, d in enumerate(dims):
        if symbolic[n]:
            v = Var(f"d{n}", int32)
            env[v] = d
            shape.append(v)
        else:
            shape.append(d)
    total = int(np.prod(dims))
    assert evaluate(convert(product(shape)), env) == total
    flat_value = data.draw(st.integers(0, total - 1))
    flat = Var("flat", int32)
    coords = [evaluate(c, {**env, flat: flat_value}) for c in unravel(flat, shape)]
    assert coords == [int(c) for c in np.unravel_index(flat_value, dims)]


@settings(max_examples=example_count(30), deadline=None)
@given(batch=st.lists(st.sampled_from([2, 3]), min_size=1, max_size=3), data=st.data())
def test_broadcast_batch_reads_the_element_numpy_broadcasts(batch: list[int], data: st.DataObject) -> None:
    dims = [data.draw(st.sampled_from([1, d])) for d in batch][data.draw(st.integers(0, len(batch))):]
    coords = tuple(data.draw(st.integers(0, d - 1)) for d in batch)
    operand = np.arange(int(np.prod(dims)), dtype=np.int64).reshape(dims)
    index = tuple(evaluate(e, {}) for e in broadcast_batch([convert(c) for c in coords], dims))
    assert operand[index] == np.broadcast_to(operand, batch)[coords]


def test_a_template_that_passes_its_tensor_along_is_refused() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def helper(p: ~f32) -> f32:
            attrs.func_kind = "cpu_internal"
            return p[0]

        @hidet.script
        def kernel(n: i32, a: f32[n], b: f32[n]):  # noqa: F821 (parameters)
            attrs.func_kind = "public"
            for i in range(n):
                b[i] = helper(a)

    x = tensor_input("x", "float32", [5])
    y = compute("y", [5], lambda i: x[i])
    signature = kernel_signature((x,), (y,))
    with pytest.raises(ValueError, match="uses its tensor 'a' other than by element accesses"):
        bind_template(module.ir_module(), "bound", {"n": 5},
                      [View(x, lambda i: i), View(signature.outputs[0], lambda i: i)], signature)
