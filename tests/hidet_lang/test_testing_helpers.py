"""hidet_lang.testing: the hypothesis strategies and check_kernel promised by API.md §5."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hidet_lang.ir.mapping import ComposedMapping, RepeatMapping, SpatialMapping, TaskMapping
from hidet_lang.testing import (
    DTYPE_KINDS,
    EDGE_FLOATS,
    arrays,
    check_kernel,
    default_tolerances,
    dtypes,
    example_count,
    int_bound,
    shapes,
    task_mappings,
    with_edge_values,
)

EXAMPLES = settings(max_examples=example_count(60), deadline=None)


# ---------------------------------------------------------------------------------------------------------
# strategies


@EXAMPLES
@given(st.data())
def test_shapes_respect_bounds(data):
    min_dims = data.draw(st.integers(0, 3))
    max_dims = data.draw(st.integers(min_dims, 4))
    min_side = data.draw(st.integers(1, 5))
    max_side = data.draw(st.integers(min_side, 9))
    shape = data.draw(shapes(min_dims, max_dims, min_side, max_side))
    assert isinstance(shape, tuple) and min_dims <= len(shape) <= max_dims
    assert all(type(s) is int and min_side <= s <= max_side for s in shape)


@EXAMPLES
@given(shapes())
def test_shapes_defaults(shape):
    assert 1 <= len(shape) <= 3 and all(1 <= s <= 17 for s in shape)


def test_shapes_reach_odd_and_maximal_sides():
    seen: set[int] = set()

    @settings(max_examples=example_count(200), deadline=None, database=None, derandomize=True)
    @given(shapes(min_dims=1, max_dims=1))
    def collect(shape):
        seen.add(shape[0])

    collect()
    assert 1 in seen and any(s % 2 == 1 and s > 1 for s in seen) and max(seen) > 8


def test_shapes_reject_bad_bounds():
    with pytest.raises(ValueError, match="max_dims"):
        shapes(min_dims=3, max_dims=2)
    with pytest.raises(TypeError, match="max_side"):
        shapes(max_side=2.5)


@EXAMPLES
@given(st.data())
def test_dtypes_of_the_requested_kinds(data):
    kinds = data.draw(st.lists(st.sampled_from(sorted(DTYPE_KINDS)), min_size=1, max_size=4, unique=True))
    name = data.draw(dtypes(kinds))
    assert isinstance(name, str)
    allowed = {n for k in kinds for n in DTYPE_KINDS[k]}
    assert name in allowed
    assert np.dtype(name).name == name


@EXAMPLES
@given(dtypes())
def test_dtypes_default_is_float_and_signed_int(name):
    assert np.dtype(name).kind in "fi"


@EXAMPLES
@given(dtypes("bool"), dtypes(["uint"]))
def test_dtypes_single_kind(b, u):
    assert b == "bool" and u in ("uint8", "uint16", "uint32", "uint64")


def test_dtype_kinds_and_errors():
    assert DTYPE_KINDS["float"] == ("float16", "float32", "float64")
    assert DTYPE_KINDS["bool"] == ("bool",)
    with pytest.raises(ValueError, match="unknown kind 'complex'"):
        dtypes(("float", "complex"))
    with pytest.raises(ValueError, match="at least one"):
        dtypes(())


def _check_values(x: np.ndarray) -> None:
    if x.dtype.kind == "f":
        assert np.all(np.isfinite(x)) and np.all(np.abs(x) <= 8)
    elif x.dtype.kind == "i":
        assert np.all(np.abs(x.astype(np.int64)) <= int_bound(x.dtype))
    elif x.dtype.kind == "u":
        assert np.all(x <= int_bound(x.dtype))


@EXAMPLES
@given(arrays(dtypes(("float", "int", "uint", "bool")), shapes()))
def test_arrays_from_strategies(x):
    assert isinstance(x, np.ndarray)
    assert 1 <= x.ndim <= 3 and all(1 <= s <= 17 for s in x.shape)
    assert x.dtype.name in {n for names in DTYPE_KINDS.values() for n in names}
    _check_values(x)
    if x.dtype.kind in "iu" and x.ndim >= 1:
        # row sums in the array's own dtype do not overflow
        assert np.array_equal(x.sum(axis=-1, dtype=x.dtype).astype(np.int64), x.astype(np.int64).sum(axis=-1))
    if x.dtype.kind == "f":
        assert np.all(np.isfinite(x.sum(axis=-1, dtype=x.dtype)))


@EXAMPLES
@given(arrays("float32", (3, 5)), arrays(np.int8, 4), arrays(np.dtype("float16"), st.just((2, 2))))
def test_arrays_from_values(a, b, c):
    assert a.dtype == np.float32 and a.shape == (3, 5)
    assert b.dtype == np.int8 and b.shape == (4,)
    assert c.dtype == np.float16 and c.shape == (2, 2)
    for x in (a, b, c):
        _check_values(x)


@EXAMPLES
@given(arrays("int32", shapes(max_dims=2), elements=st.integers(100, 200)))
def test_arrays_custom_elements(x):
    assert x.dtype == np.int32 and np.all((x >= 100) & (x <= 200))


def test_edge_values_mix_nan_infinities_and_signed_zeros_into_the_elements():
    seen = {"nan": False, "inf": False, "-inf": False, "-0.0": False, "plain": False}

    @settings(max_examples=example_count(100), deadline=None, database=None)
    @given(arrays("float32", (40,), elements=with_edge_values(st.floats(1, 2, width=32))))
    def record(x):
        assert np.all(np.isnan(x) | np.isinf(x) | (x == 0) | ((x >= 1) & (x <= 2)))
        seen["nan"] |= bool(np.isnan(x).any())
        seen["inf"] |= bool((x == np.inf).any())
        seen["-inf"] |= bool((x == -np.inf).any())
        seen["-0.0"] |= bool(((x == 0) & np.signbit(x)).any())
        seen["plain"] |= bool(((x >= 1) & (x <= 2)).any())

    record()
    assert all(seen.values()), seen
    assert math.isnan(EDGE_FLOATS[0]) and -0.0 in EDGE_FLOATS
    with pytest.raises(ValueError, match="at least one"):
        with_edge_values(st.floats(), values=())


def test_int_bounds_keep_int8_row_sums_in_range():
    assert 17 * int_bound("int8") <= np.iinfo(np.int8).max
    assert 17 * int_bound("uint8") <= np.iinfo(np.uint8).max


def _factors(m: TaskMapping) -> list[TaskMapping]:
    if isinstance(m, ComposedMapping):
        return _factors(m.outer) + _factors(m.inner)
    return [m]


@EXAMPLES
@given(st.data())
def test_task_mappings_respect_bounds(data):
    max_workers = data.draw(st.integers(1, 64))
    max_dims = data.draw(st.integers(1, 3))
    max_extent = data.draw(st.integers(1, 8))
    m = data.draw(task_mappings(max_workers=max_workers, max_dims=max_dims, max_task_extent=max_extent))
    assert isinstance(m, TaskMapping)
    assert 1 <= m.num_workers <= max_workers
    assert 1 <= len(m.task_shape) <= max_dims
    assert math.prod(m.task_shape) <= 512
    factors = _factors(m)
    assert 1 <= len(factors) <= 3
    for f in factors:
        assert isinstance(f, (SpatialMapping, RepeatMapping))
        assert len(f.task_shape) == len(m.task_shape)
        assert all(1 <= e <= max_extent for e in f.task_shape)


def test_task_mappings_draw_both_kinds_and_compositions():
    kinds: set[type] = set()
    sizes: set[int] = set()

    @settings(max_examples=example_count(150), deadline=None, database=None, derandomize=True)
    @given(task_mappings())
    def collect(m):
        for f in _factors(m):
            kinds.add(type(f))
        sizes.add(len(_factors(m)))

    collect()
    assert kinds == {SpatialMapping, RepeatMapping} and sizes == {1, 2, 3}


# ---------------------------------------------------------------------------------------------------------
# check_kernel


def make_add(*, bug=None, names=("a", "b", "c")):
    """A pure-Python stand-in for a built module: c = a + b, optionally broken by `bug(a, b, c)`."""

    def module(a, b, c):
        c[...] = a + b
        if bug is not None:
            bug(a, b, c)

    if names is not None:
        module.param_names = names
    return module


def reference_add(a, b, c):
    c[...] = a + b


def inputs(dtype="float32", shape=(4, 5)):
    rng = np.random.default_rng(0)
    a = rng.uniform(-8, 8, shape).astype(dtype)
    b = rng.uniform(-8, 8, shape).astype(dtype)
    return a, b, np.zeros(shape, dtype)


def test_check_kernel_passes_on_a_correct_module():
    a, b, c = inputs()
    originals = [x.copy() for x in (a, b, c)]
    assert check_kernel(make_add(), reference_add, a, b, c) is None
    # the caller's arrays are untouched: both sides run on copies
    for x, y in zip((a, b, c), originals, strict=True):
        assert np.array_equal(x, y)


def test_check_kernel_reports_argument_index_and_values():
    def bug(a, b, c):
        c[3, 0] = 100.0
        c[1, 2] = -50.0

    a, b, c = inputs()
    with pytest.raises(AssertionError) as info:
        check_kernel(make_add(bug=bug), reference_add, a, b, c)
    text = str(info.value)
    assert "args[2] ('c')" in text
    assert "at index (1, 2)" in text  # the first mismatch in row-major order
    assert "kernel -50.0" in text and f"reference {a[1, 2] + b[1, 2]}" in text
    assert "2 of 20 element(s) differ" in text


def test_check_kernel_without_param_names():
    def bug(a, b, c):
        b[0] = 1

    a, b, c = inputs("int32", (6,))
    b[0] = 0
    with pytest.raises(AssertionError, match=r"^args\[1\] differs from the reference at index \(0,\)"):
        check_kernel(make_add(bug=bug, names=None), reference_add, a, b, c)


def test_check_kernel_detects_nan():
    def bug(a, b, c):
        c[0, 1] = np.nan

    a, b, c = inputs("float64")
    with pytest.raises(AssertionError, match=r"args\[2\] \('c'\) .* index \(0, 1\): kernel nan"):
        check_kernel(make_add(bug=bug), reference_add, a, b, c)

    # NaN where the reference also has NaN is a match; a number where it has NaN is not
    a[2, 2] = np.nan
    check_kernel(make_add(), reference_add, a, b, c)

    def fix(a, b, c):
        c[2, 2] = 0.0

    with pytest.raises(AssertionError, match=r"index \(2, 2\): kernel 0.0, reference nan; 1 of 20"):
        check_kernel(make_add(bug=fix), reference_add, a, b, c)


def test_check_kernel_passes_scalars_through():
    calls = []

    def module(n, x):
        calls.append(n)
        x[:n] = 1

    def reference(n, x):
        calls.append(n)
        x[:n] = 1

    check_kernel(module, reference, 3, np.zeros(5, np.int64))
    assert calls == [3, 3]

    def wrong(n, x):
        x[: n + 1] = 1

    wrong.param_names = ["n", "x"]
    with pytest.raises(AssertionError, match=r"args\[1\] \('x'\) .* index \(3,\): kernel 1, reference 0"):
        check_kernel(wrong, reference, 3, np.zeros(5, np.int64))


def test_check_kernel_default_tolerances():
    assert default_tolerances("int32") == (0.0, 0.0) and default_tolerances("bool") == (0.0, 0.0)
    assert default_tolerances("float32")[0] == pytest.approx(1e-5)
    assert default_tolerances("float64")[0] == pytest.approx(1e-12)
    assert default_tolerances("float16")[0] == pytest.approx(1e-3)

    def scale(factor):
        def bug(a, b, c):
            c *= factor

        return bug

    a, b, c = inputs("float32")
    check_kernel(make_add(bug=scale(np.float32(1 + 1e-6))), reference_add, a, b, c)
    with pytest.raises(AssertionError, match="rtol=1e-05"):
        check_kernel(make_add(bug=scale(np.float32(1 + 1e-3))), reference_add, a, b, c)
    check_kernel(make_add(bug=scale(np.float32(1 + 1e-3))), reference_add, a, b, c, rtol=1e-2)

    a, b, c = inputs("float64")
    with pytest.raises(AssertionError, match=r"20 of 20 element\(s\) differ .* \[rtol=1e-12, atol=1e-12,"):
        check_kernel(make_add(bug=scale(1 + 1e-9)), reference_add, a, b, c)

    def off_by_one(a, b, c):
        c[0, 0] += 1

    a, b, c = inputs("int64")
    with pytest.raises(AssertionError, match="kernel .* 1 of 20"):
        check_kernel(make_add(bug=off_by_one), reference_add, a, b, c)
    check_kernel(make_add(bug=off_by_one), reference_add, a, b, c, atol=1)


def test_check_kernel_detects_an_overwritten_input():
    def bug(a, b, c):
        a[0, 0] = 0

    a, b, c = inputs()
    a[0, 0] = 1
    with pytest.raises(AssertionError, match=r"args\[0\] \('a'\) .* index \(0, 0\)"):
        check_kernel(make_add(bug=bug), reference_add, a, b, c)


def test_check_kernel_zero_dim_and_bool():
    def module(x, y):
        y[...] = ~x

    def reference(x, y):
        y[...] = x

    x = np.array([True, False])
    with pytest.raises(AssertionError, match=r"index \(0,\): kernel False, reference True; 2 of 2"):
        check_kernel(module, reference, x, np.zeros(2, bool))

    def fill(z):
        z[()] = 2.0

    def fill_ref(z):
        z[()] = 3.0

    with pytest.raises(AssertionError, match=r"args\[0\] differs from the reference at index \(\)"):
        check_kernel(fill, fill_ref, np.zeros((), np.float32))


@EXAMPLES
@given(arrays("float32", shapes()), st.data())
def test_check_kernel_reports_the_perturbed_index(x, data):
    index = tuple(data.draw(st.integers(0, s - 1)) for s in x.shape)

    def module(x, out):
        out[...] = x * 2
        out[index] += 1

    module.param_names = ("x", "out")

    def reference(x, out):
        out[...] = x * 2

    with pytest.raises(AssertionError) as info:
        check_kernel(module, reference, x, np.zeros_like(x))
    assert f"args[1] ('out') differs from the reference at index {index}:" in str(info.value)
    assert f"1 of {x.size} element(s) differ" in str(info.value)


def test_import_hidet_lang_does_not_import_testing():
    code = (
        "import sys, hidet_lang; "
        "bad = [m for m in ('hidet_lang.testing', 'hypothesis') if m in sys.modules]; "
        "assert not bad, bad"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_the_thorough_profile_runs_ten_times_the_examples() -> None:
    from hypothesis import settings

    from hidet_lang.testing import example_count, load_profile
    from hidet_lang.testing.profiles import THOROUGH_FACTOR

    before = settings.default.max_examples
    try:
        assert load_profile("thorough") == "thorough"
        assert example_count(5) == 5 * THOROUGH_FACTOR == 50 and settings.default.deadline is None
    finally:
        load_profile("default")
    assert example_count(5) == 5 and settings.default.max_examples == before


def test_the_rerun_profile_runs_a_quarter_of_the_examples_and_at_least_one() -> None:
    from hidet_lang.testing import example_count, load_profile

    try:
        assert load_profile("rerun") == "rerun"
        assert example_count(40) == 10 and example_count(2) == 1
    finally:
        load_profile("default")
    assert example_count(40) == 40


def test_the_mutation_profile_keeps_the_counts_and_does_not_shrink() -> None:
    from hypothesis import Phase, settings

    from hidet_lang.testing import example_count, load_profile

    try:
        assert load_profile("mutation") == "mutation"
        assert example_count(40) == 40 and Phase.shrink not in settings.default.phases
    finally:
        load_profile("default")
    assert Phase.shrink in settings.default.phases
