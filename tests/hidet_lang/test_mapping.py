"""Task mappings (hidet_lang.ir.mapping): the Python-side semantics the lowering is tested against."""

from __future__ import annotations

import ast
import copy
import dataclasses
import math
import pickle
import re
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hidet_lang.ir import loop_attrs as loop_attrs_module
from hidet_lang.ir import mapping as mapping_module
from hidet_lang.ir.mapping import (
    ComposedMapping,
    MappingOn,
    MappingTypeError,
    RepeatMapping,
    SpatialMapping,
    TaskMapping,
    auto_map,
    repeat,
    spatial,
)
from hidet_lang.testing import example_count, task_mappings

EXAMPLES = settings(max_examples=example_count(80), deadline=None)


def grid(shape):
    return set(product(*(range(e) for e in shape)))


def assert_bijection(m: TaskMapping) -> None:
    """Every cell of the task grid is owned by exactly one (worker, position) pair; equal work per worker."""
    seen: dict[tuple[int, ...], tuple[int, int]] = {}
    per_worker = math.prod(m.task_shape) // m.num_workers
    assert per_worker * m.num_workers == math.prod(m.task_shape)
    for w in range(m.num_workers):
        tasks = m(w)
        assert len(tasks) == per_worker
        for k, task in enumerate(tasks):
            assert isinstance(task, tuple) and len(task) == len(m.task_shape)
            assert all(type(i) is int for i in task)
            assert task not in seen, f"{task} owned by {seen[task]} and {(w, k)}"
            seen[task] = (w, k)
    assert set(seen) == grid(m.task_shape)


def semantics(m: TaskMapping):
    return m.num_workers, m.task_shape, [m(w) for w in range(m.num_workers)]


@st.composite
def factors(draw, ndim: int, max_extent: int = 3) -> TaskMapping:
    """One spatial or repeat mapping of `ndim` dims with random ranks (and attrs)."""
    shape = draw(st.lists(st.integers(1, max_extent), min_size=ndim, max_size=ndim))
    ranks = draw(st.permutations(range(ndim)))
    if draw(st.booleans()):
        return spatial(*shape, ranks=ranks)
    return repeat(*shape, ranks=ranks, attrs=draw(st.text(".u", min_size=ndim, max_size=ndim)))


@st.composite
def same_rank_factors(draw, count: int) -> list[TaskMapping]:
    ndim = draw(st.integers(1, 3))
    return [draw(factors(ndim)) for _ in range(count)]


# ---------------------------------------------------------------------------------------------------------
# the API.md §3 example and basic shapes


def test_api_example():
    m = spatial(4, 8) * repeat(2, 2)
    assert m.num_workers == 32 and m.task_shape == (8, 16)
    assert m(5) == [(0, 10), (0, 11), (1, 10), (1, 11)]
    assert spatial(4, 8).repeat(2, 2) == m
    assert isinstance(m, ComposedMapping) and m.outer == spatial(4, 8) and m.inner == repeat(2, 2)
    assert str(m) == "spatial(4, 8) * repeat(2, 2)" and repr(m) == str(m)
    assert auto_map(64, 8, workers=128) == repeat(4, 1) * spatial(16, 8)


def test_spatial_row_major_default():
    m = spatial(4, 8)
    assert m.num_workers == 32 and m.task_shape == (4, 8)
    assert m(0) == [(0, 0)] and m(5) == [(0, 5)] and m(8) == [(1, 0)] and m(31) == [(3, 7)]
    assert isinstance(m, SpatialMapping) and m.ranks == (0, 1)


def test_repeat_row_major_default():
    m = repeat(2, 3)
    assert m.num_workers == 1 and m.task_shape == (2, 3)
    assert m(0) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert isinstance(m, RepeatMapping) and m.ranks == (0, 1) and m.attrs == ".."


def test_spatial_ranks():
    # dim 1 has the lowest rank: it varies slowest
    m = spatial(4, 8, ranks=(1, 0))
    assert m(1) == [(1, 0)] and m(4) == [(0, 1)] and m(5) == [(1, 1)]
    # dim 1 slowest, then dim 2, dim 0 fastest
    m3 = spatial(2, 3, 4, ranks=[2, 0, 1])
    assert m3.ranks == (2, 0, 1)
    assert m3(1) == [(1, 0, 0)] and m3(2) == [(0, 0, 1)] and m3(8) == [(0, 1, 0)]


def test_repeat_ranks_and_attrs():
    m = repeat(2, 3, ranks=(1, 0))
    assert m(0) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    # attrs are a compiler hint only
    assert repeat(2, 3, attrs="u.")(0) == repeat(2, 3)(0)
    assert repeat(2, 3, attrs="u.").attrs == "u."
    assert repeat(2, 3, attrs="u.") != repeat(2, 3)
    assert repeat(2, 3, attrs="..") == repeat(2, 3)


@EXAMPLES
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.data())
def test_spatial_ranks_match_numpy_unravel(shape, data):
    ranks = data.draw(st.permutations(range(len(shape))))
    m = spatial(*shape, ranks=ranks)
    order = sorted(range(len(shape)), key=lambda d: ranks[d])  # slowest dim first
    for w in range(m.num_workers):
        digits = np.unravel_index(w, [shape[d] for d in order])
        expected = [0] * len(shape)
        for d, v in zip(order, digits, strict=True):
            expected[d] = int(v)
        assert m(w) == [tuple(expected)]


@EXAMPLES
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_repeat_ranks_are_a_loop_nest(shape, data):
    ranks = data.draw(st.permutations(range(len(shape))))
    tasks = repeat(*shape, ranks=ranks)(0)
    # sorting by the keys (dim of rank 0, dim of rank 1, ...) must keep the execution order
    order = sorted(range(len(shape)), key=lambda d: ranks[d])
    keys = [tuple(t[d] for d in order) for t in tasks]
    assert keys == sorted(keys) and len(set(tasks)) == len(tasks) == math.prod(shape)


def test_composition_worker_split():
    m = spatial(2, 2) * spatial(2, 2)
    # worker 5: outer worker 1 -> (0, 1), inner worker 1 -> (0, 1)
    assert m(5) == [(0, 3)]
    m = repeat(2, 1) * spatial(1, 3)
    assert m.num_workers == 3 and m(2) == [(0, 2), (1, 2)]
    m = spatial(2, 1) * repeat(1, 2) * spatial(1, 2)
    assert m.task_shape == (2, 4) and m(3) == [(1, 1), (1, 3)]


def test_composition_outer_worker_is_the_slow_part():
    m = spatial(2, 1) * spatial(1, 3)
    assert [m(w) for w in range(6)] == [[(0, 0)], [(0, 1)], [(0, 2)], [(1, 0)], [(1, 1)], [(1, 2)]]
    m = spatial(1, 3) * spatial(2, 1)
    assert [m(w) for w in range(6)] == [[(0, 0)], [(1, 0)], [(0, 1)], [(1, 1)], [(0, 2)], [(1, 2)]]


def reference_tasks(m: TaskMapping, w: int) -> list[tuple[int, ...]]:
    """The semantics of DESIGN.md §3 / API.md §3, written independently with numpy index helpers."""
    if isinstance(m, SpatialMapping):
        order = np.argsort(m.ranks)  # slowest dim first
        digits = np.unravel_index(w, [m.shape[d] for d in order])
        return [tuple(int(digits[list(order).index(d)]) for d in range(len(m.shape)))]
    if isinstance(m, RepeatMapping):
        order = np.argsort(m.ranks)  # outermost loop first
        nest = np.ndindex(*[m.shape[d] for d in order])
        return [tuple(int(ix[list(order).index(d)]) for d in range(len(m.shape))) for ix in nest]
    assert isinstance(m, ComposedMapping)
    n_inner = m.inner.num_workers
    scale = np.array(m.inner.task_shape)
    return [
        tuple(int(v) for v in np.array(o) * scale + np.array(i))
        for o in reference_tasks(m.outer, w // n_inner)
        for i in reference_tasks(m.inner, w % n_inner)
    ]


# ---------------------------------------------------------------------------------------------------------
# properties


@EXAMPLES
@given(task_mappings())
def test_random_mappings_match_the_reference_semantics(m):
    for w in range(m.num_workers):
        assert m(w) == reference_tasks(m, w)


@EXAMPLES
@given(task_mappings())
def test_random_mappings_are_bijections(m):
    assert_bijection(m)


@EXAMPLES
@given(same_rank_factors(3))
def test_composition_is_associative(fs):
    a, b, c = fs
    left, right = (a * b) * c, a * (b * c)
    assert semantics(left) == semantics(right)
    assert_bijection(left)


@EXAMPLES
@given(task_mappings())
def test_extent_one_factors_are_identities(m):
    ones = (1,) * len(m.task_shape)
    expected = semantics(m)
    for identity in (repeat(*ones), spatial(*ones)):
        assert semantics(m * identity) == expected
        assert semantics(identity * m) == expected


@EXAMPLES
@given(same_rank_factors(2))
def test_chained_form_equals_product(fs):
    a, b = fs
    if isinstance(b, SpatialMapping):
        chained = a.spatial(*b.shape, ranks=b.ranks)
    else:
        chained = a.repeat(*b.shape, ranks=b.ranks, attrs=b.attrs)
    assert chained == a * b
    assert hash(chained) == hash(a * b)


@EXAMPLES
@given(task_mappings())
def test_repr_round_trips(m):
    rebuilt = eval(repr(m), {"spatial": spatial, "repeat": repeat})
    assert rebuilt == m


@EXAMPLES
@given(same_rank_factors(2))
def test_composition_counts(fs):
    a, b = fs
    m = a * b
    assert m.num_workers == a.num_workers * b.num_workers
    assert m.task_shape == tuple(x * y for x, y in zip(a.task_shape, b.task_shape, strict=True))


# ---------------------------------------------------------------------------------------------------------
# auto_map


@EXAMPLES
@given(st.lists(st.integers(1, 12), min_size=1, max_size=3), st.data())
def test_auto_map_covers_the_grid(shape, data):
    total = math.prod(shape)
    workers = data.draw(st.sampled_from([d for d in range(1, total + 1) if total % d == 0]))
    ranks = data.draw(st.none() | st.permutations(range(len(shape))))
    m = auto_map(*shape, workers=workers, ranks=ranks)
    assert m.num_workers == workers and m.task_shape == tuple(shape)
    assert isinstance(m.outer, RepeatMapping) and isinstance(m.inner, SpatialMapping)
    assert_bijection(m)


@EXAMPLES
@given(st.lists(st.integers(1, 12), min_size=1, max_size=3), st.integers(1, 300))
def test_auto_map_rejects_counts_that_do_not_divide(shape, workers):
    total = math.prod(shape)
    if total % workers == 0:
        assert auto_map(*shape, workers=workers).num_workers == workers
        return
    with pytest.raises(ValueError, match=f"{workers} workers cannot cover") as info:
        auto_map(*shape, workers=workers)
    # every suggested worker count works
    suggested = [int(s) for s in re.findall(r"workers=(\d+)", str(info.value).split("e.g.")[1])]
    assert suggested
    for s in suggested:
        assert auto_map(*shape, workers=s).num_workers == s


def test_auto_map_prefers_inner_dims_and_honours_ranks():
    assert auto_map(8, 64, workers=128, ranks=(1, 0)) == repeat(1, 4, ranks=(1, 0)) * spatial(
        8, 16, ranks=(1, 0)
    )
    assert auto_map(4, 6, workers=6) == repeat(4, 1) * spatial(1, 6)
    assert auto_map(4, 6, workers=12) == repeat(2, 1) * spatial(2, 6)
    assert auto_map(64, 8, workers=1) == repeat(64, 8) * spatial(1, 1)


def test_auto_map_error_message():
    with pytest.raises(ValueError) as info:
        auto_map(6, workers=4)
    text = str(info.value)
    assert "auto_map(6, workers=4)" in text and "(6,)" in text
    assert "does not divide" in text and "workers=3" in text and "workers=6" in text
    with pytest.raises(ValueError, match="more workers than tasks"):
        auto_map(2, 3, workers=7)
    with pytest.raises(ValueError, match="workers must be a positive int"):
        auto_map(4, workers=0)
    with pytest.raises(TypeError, match="workers must be an int"):
        auto_map(4, workers=2.0)


# ---------------------------------------------------------------------------------------------------------
# argument validation


@pytest.mark.parametrize(
    "make, error, pattern",
    [
        (
            lambda: spatial(4, 0),
            ValueError,
            r"spatial\(\): the extent of dim 1 in \(4, 0\) must be a positive",
        ),
        (lambda: repeat(-2), ValueError, r"repeat\(\): the extent of dim 0 .* got -2"),
        (lambda: spatial(4, 2.0), TypeError, r"extent of dim 1 .* must be an int, got float 2.0"),
        (lambda: repeat(True, 2), TypeError, r"extent of dim 0 .* got the bool True"),
        (lambda: spatial("4"), TypeError, r"must be an int, got str"),
        (lambda: spatial(), ValueError, r"at least one extent"),
        (lambda: spatial(2, 2, ranks=(0, 0)), ValueError, r"ranks must be a permutation of \(0, 1\)"),
        (lambda: spatial(2, 2, ranks=(0,)), ValueError, r"ranks must be a permutation"),
        (lambda: repeat(2, 2, ranks=(0, 1.0)), TypeError, r"ranks\[1\] must be an int"),
        (lambda: repeat(2, 2, ranks=5), TypeError, r"ranks must be a sequence"),
        (lambda: repeat(2, 2, attrs="u"), ValueError, r"attrs 'u' must have one token per dimension \(2\)"),
        (lambda: repeat(2, 2, attrs="ux"), ValueError, r"attrs 'ux' must have one token per dimension"),
        (lambda: repeat(2, 2, attrs="u0."), ValueError, r"the factor of 'u0' must be at least 1"),
        (lambda: repeat(2, attrs=1), TypeError, r"attrs must be a str or None"),
        (lambda: spatial(2) * spatial(2, 2), ValueError, r"spatial\(2\) \(task shape \(2,\)\).*\(2, 2\)"),
        (lambda: spatial(2) * 3, TypeError, r"unsupported operand"),
        (lambda: ComposedMapping(spatial(2), "x"), TypeError, r"inner must be a TaskMapping"),
        (lambda: MappingOn(mapping=3, worker=0), TypeError, r"mapping must be a TaskMapping"),
    ],
)
def test_bad_arguments(make, error, pattern):
    with pytest.raises(error, match=pattern):
        make()


def test_type_errors_are_also_value_errors():
    assert issubclass(MappingTypeError, TypeError) and issubclass(MappingTypeError, ValueError)
    with pytest.raises(ValueError):
        spatial(1.5)


def test_worker_validation():
    m = spatial(4, 8) * repeat(2, 2)
    for bad in (-1, 32, 100):
        with pytest.raises(ValueError, match=f"worker {bad} is out of range .* 32 worker"):
            m(bad)
    for bad in (1.0, True, "1", None):
        with pytest.raises(ValueError, match="worker must be an int"):
            m(bad)
    assert m(np.int32(5)) == m(5)


def test_numpy_ints_and_sequences_are_accepted():
    m = spatial(np.int64(4), np.int32(8))
    assert m == spatial(4, 8) and all(type(e) is int for e in m.shape)
    assert spatial((4, 8)) == spatial([4, 8]) == spatial(4, 8)
    assert repeat(2, 3, ranks=np.array([1, 0])) == repeat(2, 3, ranks=(1, 0))
    assert auto_map(np.int64(8), workers=np.int64(4)) == auto_map(8, workers=4)


def test_mappings_are_immutable_values():
    m = spatial(4, 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.shape = (1,)
    assert {spatial(4, 8), spatial(4, 8), repeat(4, 8)} == {spatial(4, 8), repeat(4, 8)}
    assert spatial(2, 2) != repeat(2, 2) and spatial(2, 2) != spatial(2, 2, ranks=(1, 0))
    m = spatial(4, 8, ranks=(1, 0)).repeat(2, 2, attrs="u.")
    assert pickle.loads(pickle.dumps(m)) == m and copy.deepcopy(m) == m


def test_on_records_the_worker():
    m = spatial(4, 8)
    worker = object()
    bound = m.on(worker)
    assert isinstance(bound, MappingOn) and bound.mapping is m and bound.worker is worker
    assert bound == MappingOn(mapping=m, worker=worker)
    with pytest.raises(dataclasses.FrozenInstanceError):
        bound.worker = 1


def test_repr_of_non_default_options():
    assert repr(spatial(2, 3, ranks=[1, 0])) == "spatial(2, 3, ranks=(1, 0))"
    assert repr(repeat(2, 3, ranks=(1, 0), attrs="u.")) == "repeat(2, 3, ranks=(1, 0), attrs='u.')"
    assert str(spatial(2) * (repeat(2) * spatial(3))) == "spatial(2) * (repeat(2) * spatial(3))"
    assert str(spatial(2) * repeat(2) * spatial(3)) == "spatial(2) * repeat(2) * spatial(3)"


def test_module_imports_nothing_from_the_project():
    tree = ast.parse(Path(mapping_module.__file__).read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    roots = {m.split(".")[0] for m in modules if m and m != "hidet_lang.ir.loop_attrs"}  # plain Python too
    assert roots <= {"__future__", "math", "operator", "collections", "dataclasses", "itertools", "typing"}
    tree = ast.parse(Path(loop_attrs_module.__file__).read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert {m.split(".")[0] for m in modules} <= {"__future__", "re", "dataclasses"}


# ---------------------------------------------------------------------------------------------------------
# visualize


def parse_picture(lines: list[str]) -> dict[tuple[int, int], int]:
    """Reads a 2-D picture (header, rule, rows) back into {(row, col): worker}."""
    header, rule, *rows = lines
    cols = [int(c) for c in header.split("|")[1].split()]
    assert set(rule) == {"-", "+"}
    cells = {}
    for r, line in enumerate(rows):
        label, values = line.split("|")
        assert label.strip() in ("", str(r))
        for c, v in zip(cols, values.split(), strict=True):
            cells[(r, c)] = int(v)
    return cells


def test_visualize_2d():
    m = spatial(4, 8) * repeat(2, 2)
    lines = m.visualize().splitlines()
    assert lines[0] == "spatial(4, 8) * repeat(2, 2): 32 worker(s), task shape (8, 16)"
    assert lines[1].split("|")[1].split() == [str(c) for c in range(16)]
    assert lines[5] == "2 |  8  8  9  9 10 10 11 11 12 12 13 13 14 14 15 15"
    cells = parse_picture(lines[1:])
    assert len(cells) == 8 * 16
    assert cells[(0, 0)] == 0 and cells[(1, 1)] == 0 and cells[(0, 2)] == 1
    assert cells[(2, 5)] == 10 and cells[(7, 15)] == 31
    # the columns are aligned
    assert len({len(line) for line in lines[1:]} - {len(lines[2])}) == 0


def test_visualize_1d_and_3d():
    lines = (spatial(4) * repeat(2)).visualize().splitlines()
    assert lines[0].startswith("spatial(4) * repeat(2): 4 worker(s)")
    assert parse_picture(lines[1:4]) == {(0, c): c // 2 for c in range(8)}
    assert len(lines) == 4

    m = spatial(2, 1, 2) * repeat(1, 2, 1)
    lines = m.visualize().splitlines()
    assert lines[1] == "[0, :, :]" and lines[6] == "[1, :, :]"
    first, second = parse_picture(lines[2:6]), parse_picture(lines[7:11])
    assert first == {(0, 0): 0, (0, 1): 1, (1, 0): 0, (1, 1): 1}
    assert second == {(0, 0): 2, (0, 1): 3, (1, 0): 2, (1, 1): 3}


@settings(max_examples=example_count(40), deadline=None)
@given(task_mappings(max_dims=2))
def test_visualize_agrees_with_call(m):
    lines = m.visualize().splitlines()
    cells = parse_picture(lines[1:])
    owner = {t: w for w in range(m.num_workers) for t in m(w)}
    if len(m.task_shape) == 1:
        owner = {(0, t[0]): w for t, w in owner.items()}
    assert cells == owner
