"""Data layouts (hidet_lang.ir.layout): their Python-side semantics, their IR form, and tensor types with layouts."""

from __future__ import annotations

import math
from itertools import product
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f32, grid, register_tensor, tensor
from hidet_lang.errors import DSLTypeError, DSLValueError
from hidet_lang.ir import expr as E
from hidet_lang.ir import layout as layout_module
from hidet_lang.ir.evaluate import evaluate
from hidet_lang.ir.layout import (
    ComposedLayout,
    ConcatLayout,
    Layout,
    StridedLayout,
    column_major,
    local_layout,
    row_major,
    strided_layout,
)
from hidet_lang.ir.mapping import ComposedMapping, RepeatMapping, SpatialMapping, TaskMapping, repeat, spatial
from hidet_lang.ir.types import TensorType, float32, int32
from hidet_lang.passes.flatten_tensor_access import flatten_tensor_access
from hidet_lang.testing import example_count, task_mappings

EXAMPLES = settings(max_examples=example_count(60), deadline=None)
ISSUE_LAYOUT = local_layout(4, 2) * row_major(2, 2) * local_layout(2, 16) * row_major(4, 4)
ISSUE_MAPPING = spatial(4, 2).repeat(2, 2).spatial(2, 16).repeat(4, 4)


def indices_of(layout: Layout):
    return product(*(range(e) for e in layout.shape))


def offsets(layout: Layout) -> dict[tuple[int, ...], int]:
    return {index: layout(*index) for index in indices_of(layout)}


# ------------------------------------------------------------------------------------------------ strategies
@st.composite
def _dims(draw: st.DrawFn, ndim: int, max_extent: int, budget: int) -> tuple[int, ...]:
    """`ndim` extents in [1, max_extent] whose product is at most `budget`."""
    dims = []
    for _ in range(ndim):
        extent = draw(st.integers(1, max(1, min(max_extent, budget))))
        dims.append(extent)
        budget //= extent
    return tuple(dims)


@st.composite
def dense_parts(draw: st.DrawFn, ndim: int, budget: int = 64) -> Layout:
    """A row-major, column-major or rank-ordered dense layout of `ndim` dims and at most `budget` cells."""
    shape = draw(_dims(ndim, 4, budget))
    kind = draw(st.sampled_from(["row", "column", "ranks"]))
    if kind == "row":
        return row_major(*shape)
    if kind == "column":
        return column_major(*shape)
    return strided_layout(shape, ranks=draw(st.permutations(range(ndim))))


@st.composite
def _layouts_of_rank(draw: st.DrawFn, ndim: int, depth: int, budget: int, parts: Any) -> Layout:
    if depth == 0 or draw(st.booleans()):
        return draw(parts(ndim, budget))
    if ndim >= 2 and draw(st.booleans()):
        split = draw(st.integers(1, ndim - 1))
        a = draw(_layouts_of_rank(split, depth - 1, budget, parts))
        return a + draw(_layouts_of_rank(ndim - split, depth - 1, max(1, budget // math.prod(a.shape)), parts))
    outer = draw(_layouts_of_rank(ndim, depth - 1, budget, parts))
    return outer * draw(_layouts_of_rank(ndim, depth - 1, max(1, budget // math.prod(outer.shape)), parts))


def dense_layouts(max_dims: int = 3, depth: int = 3, budget: int = 1024) -> st.SearchStrategy[Layout]:
    """Compositions (`*`) and concatenations (`+`) of dense parts, with at most about `budget` cells."""
    return st.integers(1, max_dims).flatmap(lambda n: _layouts_of_rank(n, depth, budget, dense_parts))


@st.composite
def any_parts(draw: st.DrawFn, ndim: int, budget: int) -> Layout:
    """A dense, local or explicitly strided (not necessarily one-to-one) layout."""
    kind = draw(st.sampled_from(["dense", "local", "strides"]))
    if kind == "dense":
        return draw(dense_parts(ndim, budget))
    shape = draw(_dims(ndim, 4, budget))
    if kind == "local":
        return local_layout(*shape)
    return strided_layout(shape, strides=draw(st.tuples(*(st.integers(0, 9) for _ in shape))))


def any_layouts(max_dims: int = 3, depth: int = 3, budget: int = 1024) -> st.SearchStrategy[Layout]:
    """Compositions and concatenations of dense, local and strided parts."""
    return st.integers(1, max_dims).flatmap(lambda n: _layouts_of_rank(n, depth, budget, any_parts))


def mirror(m: TaskMapping) -> Layout:
    """The layout that mirrors `m`: local where it is spatial, dense (in its loop order) where it repeats."""
    if isinstance(m, SpatialMapping):
        return local_layout(*m.shape)
    if isinstance(m, RepeatMapping):
        return strided_layout(m.shape, ranks=m.ranks)
    assert isinstance(m, ComposedMapping)
    return mirror(m.outer) * mirror(m.inner)


# ------------------------------------------------------------------------------------------------ semantics
def test_row_and_column_major_strides() -> None:
    assert row_major(2, 3, 4).strides == (12, 4, 1) and row_major(2, 3, 4).size == 24
    assert column_major(2, 3, 4).strides == (1, 2, 6) and column_major(2, 3, 4).size == 24
    assert row_major(2, 3)(1, 2) == 5 and column_major(2, 3)(1, 2) == 5 and column_major(2, 3)(1, 0) == 1
    assert row_major([4, 8]) == row_major(4, 8) == strided_layout((4, 8)) == strided_layout([4, 8], ranks=[0, 1])
    assert column_major(4, 8) == strided_layout([4, 8], ranks=[1, 0])
    assert strided_layout([2, 3, 4], ranks=[1, 2, 0]).strides == (3, 1, 6)  # dim 2 outermost, dim 1 contiguous


def test_local_layout_maps_everything_to_zero() -> None:
    lay = local_layout(3, 5)
    assert lay.shape == (3, 5) and lay.size == 1
    assert set(offsets(lay).values()) == {0}


def test_explicit_strides_pad_or_broadcast() -> None:
    padded = strided_layout([4, 8], strides=[9, 1])
    assert padded.size == 3 * 9 + 7 + 1 == 35
    assert padded(3, 7) == 34 and padded(1, 0) == 9
    broadcast = strided_layout([4, 8], strides=[0, 1])
    assert broadcast.size == 8 and broadcast(3, 5) == broadcast(0, 5) == 5


def test_composition_and_concatenation_follow_the_definitions() -> None:
    tiled = row_major(2, 3) * column_major(4, 5)
    assert tiled.shape == (8, 15) and tiled.size == 6 * 20
    for i, j in indices_of(tiled):
        assert tiled(i, j) == row_major(2, 3)(i // 4, j // 5) * 20 + column_major(4, 5)(i % 4, j % 5)
    cat = column_major(2, 3) + row_major(4)
    assert cat.shape == (2, 3, 4) and cat.size == 24
    for i, j, k in indices_of(cat):
        assert cat(i, j, k) == column_major(2, 3)(i, j) * 4 + k


def test_issue_example() -> None:
    assert ISSUE_LAYOUT.shape == (64, 256) == ISSUE_MAPPING.task_shape
    assert ISSUE_LAYOUT.size == 64
    assert ISSUE_MAPPING.num_workers == 256
    for w in (0, 1, 37, 255):
        regs = [ISSUE_LAYOUT(*task) for task in ISSUE_MAPPING(w)]
        assert sorted(regs) == list(range(64)), f"worker {w}: {regs}"
    assert mirror(ISSUE_MAPPING) == ISSUE_LAYOUT


@EXAMPLES
@given(dense_layouts())
def test_dense_compositions_are_bijections_onto_their_storage(lay: Layout) -> None:
    table = offsets(lay)
    assert len(table) == math.prod(lay.shape) == lay.size
    assert sorted(table.values()) == list(range(lay.size))
    assert all(type(v) is int for v in table.values())


@EXAMPLES
@given(task_mappings(max_workers=32, max_dims=3, max_task_extent=4, max_tasks=256, max_factors=4))
def test_a_layout_mirroring_a_mapping_gives_each_worker_distinct_registers(m: TaskMapping) -> None:
    lay = mirror(m)
    assert lay.shape == m.task_shape
    per_worker = math.prod(m.task_shape) // m.num_workers
    assert lay.size == per_worker  # the storage holds exactly one worker's share
    for w in range(m.num_workers):
        regs = [lay(*task) for task in m(w)]
        assert sorted(regs) == list(range(lay.size)), f"worker {w} of {m}: {regs}"


@EXAMPLES
@given(st.integers(1, 2).flatmap(lambda n: st.tuples(*(dense_parts(n, 16) for _ in range(3)))))
def test_composition_is_associative(parts: tuple[Layout, Layout, Layout]) -> None:
    a, b, c = parts
    left, right = (a * b) * c, a * (b * c)
    assert left.shape == right.shape and left.size == right.size
    assert offsets(left) == offsets(right)


@EXAMPLES
@given(st.tuples(*(st.integers(1, 2).flatmap(lambda n: dense_parts(n, 16)) for _ in range(3))))
def test_concatenation_is_associative(parts: tuple[Layout, Layout, Layout]) -> None:
    a, b, c = parts
    left, right = (a + b) + c, a + (b + c)
    assert left.shape == right.shape and left.size == right.size
    assert offsets(left) == offsets(right)


@EXAMPLES
@given(any_layouts())
def test_every_offset_is_within_the_storage(lay: Layout) -> None:
    table = offsets(lay)
    assert all(0 <= v < lay.size for v in table.values())
    assert max(table.values()) == lay.size - 1  # the size is tight: the last element is used


# ------------------------------------------------------------------------------------------------ IR
@EXAMPLES
@given(any_layouts(), st.data())
def test_offsets_of_ir_expressions_evaluate_to_the_int_offsets(lay: Layout, data: st.DataObject) -> None:
    index = data.draw(st.tuples(*(st.integers(0, e - 1) for e in lay.shape)))
    as_var = data.draw(st.tuples(*(st.booleans() for _ in lay.shape)))
    variables = [E.Var(f"i{d}", int32) for d in range(lay.ndim)]
    args = [v if is_var else E.Constant(i, int32) for v, i, is_var in zip(variables, index, as_var)]
    expr = lay(*args)
    env = dict(zip(variables, index))
    value = expr if isinstance(expr, int) else evaluate(expr, env)
    assert value == lay(*index)


def test_constant_parts_fold_away_in_ir() -> None:
    i, j = E.Var("i", int32), E.Var("j", int32)
    assert local_layout(4, 4)(i, j) == 0
    expr = (local_layout(16, 16) * row_major(4, 4))(i, j)
    assert isinstance(expr, E.Expr)
    text = str(expr)
    assert "16" not in text and "0" not in text, text  # no `(i / 4) * 0`, no `* 1`
    assert str(row_major(4)(i)) == "i" and str(column_major(4, 4)(i, j)) == "i + j * 4"


def test_ir_indices_are_not_range_checked_but_ints_are() -> None:
    i = E.Var("i", int32)
    assert isinstance(row_major(4, 4)(i, 3), E.Expr)
    with pytest.raises(ValueError, match=r"index 4 of dim 1 is out of range \[0, 4\)"):
        row_major(4, 4)(0, 4)
    with pytest.raises(ValueError, match="out of range"):
        row_major(4, 4)(-1, 0)


# ------------------------------------------------------------------------------------------------ printing
@EXAMPLES
@given(st.one_of(dense_layouts(), any_layouts()))
def test_str_is_the_python_that_builds_the_layout(lay: Layout) -> None:
    namespace = {f.__name__: f for f in (row_major, column_major, local_layout, strided_layout)}
    assert eval(str(lay), namespace) == lay  # noqa: S307 - our own printed text
    assert repr(lay) == str(lay)


def test_str_examples() -> None:
    assert str(ISSUE_LAYOUT) == "local_layout(4, 2) * row_major(2, 2) * local_layout(2, 16) * row_major(4, 4)"
    nested = row_major(2, 2) * (local_layout(2) + row_major(3))
    assert str(nested) == "row_major(2, 2) * (local_layout(2) + row_major(3))"
    assert str(column_major(4)) == "row_major(4)"  # one dim: the same strides, the same layout
    assert str(strided_layout([4, 8], strides=[9, 1])) == "strided_layout([4, 8], strides=[9, 1])"
    assert str(row_major(2, 2) * (row_major(2, 2) * row_major(2, 2))).endswith("(row_major(2, 2) * row_major(2, 2))")


# ------------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: row_major(4, 4) * row_major(2), ValueError, "same number of dims"),
        (lambda: local_layout(2) * column_major(2, 2), ValueError, "same number of dims"),
        (lambda: row_major(0, 4), ValueError, "extents must be positive, got 0 for dim 0"),
        (lambda: local_layout(4, -2), ValueError, "extents must be positive"),
        (lambda: column_major(), ValueError, "at least one dimension"),
        (lambda: row_major(2.0), TypeError, "must be an int"),
        (lambda: row_major(True), TypeError, "bool"),
        (lambda: row_major("4"), TypeError, "must be an int"),
        (lambda: row_major(4) * 2, TypeError, "both operands of `\\*` must be layouts"),
        (lambda: 2 * row_major(4), TypeError, "both operands of `\\*` must be layouts"),
        (lambda: spatial(4) * row_major(4), TypeError, "must be layouts"),
        (lambda: row_major(4) * repeat(4), TypeError, "must be layouts"),
        (lambda: row_major(4) + (2,), TypeError, "both operands of `\\+` must be layouts"),
        (lambda: 1 + row_major(4), TypeError, "must be layouts"),
        (lambda: strided_layout([4, 8], ranks=[0, 0]), ValueError, "permutation"),
        (lambda: strided_layout([4, 8], ranks=[0, 1], strides=[8, 1]), ValueError, "not both"),
        (lambda: strided_layout([4, 8], strides=[1]), ValueError, "one per dim"),
        (lambda: strided_layout([4, 8], strides=[-1, 1]), ValueError, "non-negative"),
        (lambda: strided_layout(4), TypeError, "sequence of ints"),
        (lambda: row_major(4, 4)(1), TypeError, "has 2 dims .* given 1 index"),
        (lambda: row_major(4, 4)(1, 2.5), TypeError, "must be an int"),
        (lambda: ComposedLayout(row_major(2), spatial(2)), TypeError, "inner must be a Layout"),
        (lambda: ConcatLayout("x", row_major(2)), TypeError, "a must be a Layout"),
    ],
)
def test_bad_layouts_are_errors(build, error, message) -> None:
    with pytest.raises(error, match=message):
        build()


def test_layouts_are_immutable_values() -> None:
    lay = row_major(2, 2) * local_layout(2, 2)
    with pytest.raises(AttributeError):
        lay.outer = row_major(1, 1)  # type: ignore[misc]
    assert lay == row_major(2, 2) * local_layout(2, 2) and hash(lay) == hash(row_major(2, 2) * local_layout(2, 2))
    assert row_major(2, 2) != column_major(2, 2)
    assert isinstance(row_major(3), StridedLayout)


def test_the_facade_exports_the_constructors() -> None:
    for name in ("row_major", "column_major", "local_layout", "strided_layout"):
        assert getattr(hidet, name) is getattr(layout_module, name)
        assert name in hidet.__all__


# ------------------------------------------------------------------------------------------------ tensor types
def test_tensor_type_with_a_layout() -> None:
    t = TensorType(float32, (4, 8), column_major(4, 8))
    assert t.layout == column_major(4, 8) and t.storage_size == 32
    assert str(t) == "f32[4, 8; column_major(4, 8)]"
    assert t != float32[4, 8] and hash(t) == hash(TensorType(float32, (4, 8), column_major(4, 8)))
    local = TensorType(float32, (64, 64), local_layout(16, 16) * row_major(4, 4))
    assert local.storage_size == 16 and float32[64, 64].storage_size == 64 * 64


def test_a_row_major_layout_is_the_default() -> None:
    t = TensorType(float32, (4, 8), row_major(4, 8))
    assert t.layout is None and t == float32[4, 8] and hash(t) == hash(float32[4, 8])
    assert str(t) == "f32[4, 8]"


def test_tensor_type_layout_must_match_the_shape() -> None:
    with pytest.raises(ValueError, match=r"shape \[4, 4\] .* does not match the shape \[4, 8\]"):
        TensorType(float32, (4, 4), row_major(4, 8))
    with pytest.raises(TypeError, match="must be a Layout"):
        TensorType(float32, (4, 4), (4, 4))


def test_register_tensor_takes_its_shape_from_the_layout() -> None:
    request = register_tensor(f32, layout=column_major(4, 8))
    assert request.shape == (4, 8) and request.layout == column_major(4, 8) and request.scope == ""
    assert register_tensor(f32, [4, 8], column_major(4, 8)) == request
    shared = tensor(f32, layout=local_layout(2) * row_major(4), scope="shared")
    assert shared.shape == (8,) and shared.scope == "shared"
    from hidet_lang.cuda import shared_tensor

    padded = shared_tensor(f32, layout=strided_layout([4, 8], strides=[9, 1]))
    assert padded.shape == (4, 8) and padded.scope == "shared" and padded.layout.size == 35
    assert register_tensor(f32, [4, 4]).layout is None


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: register_tensor(f32, [4, 4], column_major(4, 8)), ValueError, r"shape \[4, 4\] does not match"),
        (lambda: register_tensor(f32), TypeError, "needs a shape or a layout"),
        (lambda: register_tensor(f32, layout=[4, 4]), TypeError, "layout must be a layout"),
        (lambda: tensor(f32, [4], "shared"), TypeError, "scope='shared'"),
    ],
)
def test_bad_declarations_are_errors(call, error, message) -> None:
    with pytest.raises(error, match=message):
        call()


def test_a_declaration_carries_its_layout_into_the_ir() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def declared(out: f32[4, 8]):
            attrs.func_kind = "public"
            reg = register_tensor(f32, layout=column_major(4, 8))
            for i, j in grid(4, 8):
                reg[i, j] = 1.0
                out[i, j] = reg[i, j]

    text = str(module.ir_module())
    assert "f32[4, 8; column_major(4, 8)]" in text, text


def test_a_shape_that_disagrees_with_the_layout_names_the_line() -> None:
    with pytest.raises(DSLValueError, match=r"test_layout\.py:\d+:\d+: error: .*does not match the shape \[4, 8\]"):

        @hidet.script
        def bad(out: f32[4]):
            attrs.func_kind = "public"
            reg = register_tensor(f32, [8, 4], layout=row_major(4, 8))
            out[0] = reg[0, 0]


def test_composing_a_layout_with_a_mapping_in_a_kernel_names_the_line() -> None:
    with pytest.raises(DSLTypeError, match=r"test_layout\.py:\d+:\d+: error: .*must be layouts"):

        @hidet.script
        def bad(out: f32[4]):
            attrs.func_kind = "public"
            reg = register_tensor(f32, layout=spatial(4) * row_major(4))
            out[0] = reg[0]


def test_flattening_leaves_a_body_without_multi_dimensional_accesses_as_it_is() -> None:
    with hidet.script_module():

        @hidet.script
        def one_dim(a: f32[8], b: f32[2, 4]):
            attrs.func_kind = "public"
            for i in range(8):
                a[i] = a[i] * 2.0

        @hidet.script
        def two_dims(a: f32[8], b: f32[2, 4]):
            attrs.func_kind = "public"
            b[1, 2] = a[3]

    assert flatten_tensor_access(one_dim.ir.body) is one_dim.ir.body
    flat = flatten_tensor_access(two_dims.ir.body)
    assert flat is not two_dims.ir.body and evaluate(flat.indices[0], {}) == 6
