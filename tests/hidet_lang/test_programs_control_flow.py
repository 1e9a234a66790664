"""DSL programs with control flow, built once each and compared with numpy on random data.

Covers `if/elif/else`, static `if` on host values, `range(start, stop, step)` with runtime bounds and negative
steps, `grid(...)` (OpenMP-parallel too), `mapping.on(worker)`, `meta.range`, host tuples iterated, `while`,
`break`, `continue`, chained comparisons, boolean operators and `x if c else y`.

Runtime-sized parameters are written as string annotations (`a: "f32[n]"`) in this module: without
`from __future__ import annotations`, Python evaluates `f32[n]` when it runs the `def`, before `n` exists
(test_future_annotations.py writes them unquoted).
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f32, grid, i32, meta, repeat, spatial
from hidet_lang.testing import arrays, check_kernel, example_count

SETTINGS = settings(max_examples=example_count(30), deadline=None)

# ------------------------------------------------------------------------------------------------ if / elif / else
with hidet.script_module() as if_module:

    @hidet.script
    def classify(n: i32, a: "f32[n]", out: "i32[n]"):  # noqa: F821 - `n` is the earlier parameter
        attrs.func_kind = "public"
        for i in range(n):
            if a[i] < -2.0:
                out[i] = -2
            elif a[i] < 0.0:
                out[i] = -1
            elif a[i] == 0.0:
                out[i] = 0
            else:
                out[i] = 1


def classify_ref(n: int, a: np.ndarray, out: np.ndarray) -> None:
    out[:] = np.select([a < -2, a < 0, a == 0], [-2, -1, 0], 1)


@SETTINGS
@given(arrays("float32", st.integers(1, 40)))
def test_if_elif_else(a: np.ndarray) -> None:
    a[::3] = 0.0  # make the `== 0` branch happen
    check_kernel(if_module.build(), classify_ref, len(a), a, np.zeros(len(a), np.int32))


# ------------------------------------------------------------------------------------------------ range
with hidet.script_module() as range_module:

    @hidet.script
    def ranges(start: i32, stop: i32, step: i32, n: i32, out: "i32[n]", count: i32[1]):  # noqa: F821
        attrs.func_kind = "public"
        c = 0
        for i in range(start, stop, step):  # runtime bounds and a step whose sign is known only at run time
            out[i] += 1
            c += 1
        for i in range(n - 1, -1, -3):  # a constant negative step
            out[i] += 10
        for i in range(2, n):
            out[i] += 100
        count[0] = c


def ranges_ref(start: int, stop: int, step: int, n: int, out: np.ndarray, count: np.ndarray) -> None:
    visited = list(range(start, stop, step))
    for i in visited:
        out[i] += 1
    for i in range(n - 1, -1, -3):
        out[i] += 10
    out[2:n] += 100
    count[0] = len(visited)


@SETTINGS
@given(st.integers(1, 30), st.data())
def test_range_with_runtime_bounds_and_negative_steps(n: int, data: st.DataObject) -> None:
    step = data.draw(st.sampled_from([-4, -3, -1, 1, 2, 5]))
    if step > 0:
        start, stop = data.draw(st.integers(0, n)), data.draw(st.integers(0, n))
    else:
        start, stop = data.draw(st.integers(-1, n - 1)), data.draw(st.integers(-1, n - 1))
    check_kernel(range_module.build(), ranges_ref, start, stop, step, n, np.zeros(n, np.int32),
                 np.zeros(1, np.int32))


# ------------------------------------------------------------------------------------------------ grid (parallel)
with hidet.script_module() as grid_module:

    @hidet.script
    def transpose_scale(m: i32, n: i32, a: "f32[m, n]", b: "f32[n, m]", c: "f32[m, n]"):  # noqa: F821
        attrs.func_kind = "public"
        for i, j in grid(m, n, attrs="p."):  # the outer loop is an OpenMP parallel loop
            b[j, i] = a[i, j] * 2.0
        for i, j in grid(m, n, attrs="pp"):  # both: collapse(2)
            c[i, j] = a[i, j] + f32(i * n + j)
        for ij in grid(m, n):  # one name for two dimensions: a tuple of indices
            c[ij] = c[ij] - 1.0


def transpose_scale_ref(m: int, n: int, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    b[:] = (a * 2).T
    c[:] = a + np.arange(m * n, dtype=np.float32).reshape(m, n) - 1


@SETTINGS
@given(arrays("float32", st.tuples(st.integers(1, 19), st.integers(1, 19))))
def test_grid_and_parallel_grid(a: np.ndarray) -> None:
    m, n = a.shape
    check_kernel(grid_module.build(), transpose_scale_ref, m, n, a, np.zeros((n, m), np.float32),
                 np.zeros((m, n), np.float32))


def test_parallel_grid_is_an_openmp_loop() -> None:
    source = grid_module.build().source()
    assert "#pragma omp parallel for" in source
    assert "collapse(2)" in source


# ------------------------------------------------------------------------------------------------ task mappings
MAPPING = spatial(3, 2) * repeat(2, 3)  # 6 workers over a 6 x 6 task grid


with hidet.script_module() as mapping_module:

    @hidet.script
    def by_workers(workers: i32, out: i32[6, 6]):
        attrs.func_kind = "public"
        for w in range(workers):  # workers beyond the mapping's 6 are guarded out
            for i, j in MAPPING.on(w):
                out[i, j] += w + 1


def by_workers_ref(workers: int, out: np.ndarray) -> None:
    for w in range(min(workers, MAPPING.num_workers)):
        for i, j in MAPPING(w):
            out[i, j] += w + 1


@SETTINGS
@given(st.integers(0, 9))
def test_mapping_on_worker(workers: int) -> None:
    check_kernel(mapping_module.build(), by_workers_ref, workers, np.zeros((6, 6), np.int32))


# ------------------------------------------------------------------------------------------------ meta.range, tuples
WEIGHTS = (0.5, -1.0, 2.0)
OFFSETS = ((0, 1), (1, 0), (2, 2))

with hidet.script_module() as unrolled_module:

    @hidet.script
    def stencil(n: i32, a: "f32[n]", out: "f32[n]"):  # noqa: F821
        attrs.func_kind = "public"
        for i in range(n):
            acc = 0.0
            for k in meta.range(len(WEIGHTS)):  # unrolled while parsing: k is a Python int
                if i + k < n:
                    acc += a[i + k] * WEIGHTS[k]
            for dx, dy in OFFSETS:  # a host tuple of tuples, unrolled and unpacked
                acc += f32(dx * 10 + dy)
            out[i] = acc


def stencil_ref(n: int, a: np.ndarray, out: np.ndarray) -> None:
    for i in range(n):
        acc = np.float32(0)
        for k, w in enumerate(WEIGHTS):
            if i + k < n:
                acc += a[i + k] * np.float32(w)
        out[i] = acc + sum(dx * 10 + dy for dx, dy in OFFSETS)


@SETTINGS
@given(arrays("float32", st.integers(1, 33)))
def test_meta_range_and_host_tuples(a: np.ndarray) -> None:
    check_kernel(unrolled_module.build(), stencil_ref, len(a), a, np.zeros(len(a), np.float32))


def test_meta_range_is_unrolled() -> None:
    text = str(unrolled_module.ir_module())
    assert text.count("WEIGHTS") == 0 and text.count(" * 0.5") == 1 and text.count(" * 2.0") == 1


# ---------------------------------------------------------------------------------------------- while, break, continue
with hidet.script_module() as while_module:

    @hidet.script
    def collatz(n: i32, a: "i32[n]", steps: "i32[n]", limit: i32):  # noqa: F821
        attrs.func_kind = "public"
        for i in range(n):
            x = a[i]
            s = 0
            while x != 1:
                if s >= limit:
                    break
                s += 1
                if x % 2 == 0:
                    x = x // 2
                    continue
                x = 3 * x + 1
            steps[i] = s


def collatz_ref(n: int, a: np.ndarray, steps: np.ndarray, limit: int) -> None:
    for i in range(n):
        x, s = int(a[i]), 0
        while x != 1:
            if s >= limit:
                break
            s += 1
            x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps[i] = s


@SETTINGS
@given(arrays("int32", st.integers(1, 20), elements=st.integers(1, 1000)), st.integers(0, 200))
def test_while_break_continue(a: np.ndarray, limit: int) -> None:
    check_kernel(while_module.build(), collatz_ref, len(a), a, np.zeros(len(a), np.int32), limit)


with hidet.script_module() as search_module:

    @hidet.script
    def first_negative(n: i32, a: "f32[n]", where: i32[2]):  # noqa: F821
        attrs.func_kind = "public"
        found = -1
        skipped = 0
        for i in range(n):
            if a[i] == 0.0:
                skipped += 1
                continue
            if a[i] < 0.0:
                found = i
                break
        where[0] = found
        where[1] = skipped


def first_negative_ref(n: int, a: np.ndarray, where: np.ndarray) -> None:
    negative = np.flatnonzero(a < 0)
    where[0] = negative[0] if negative.size else -1
    stop = negative[0] if negative.size else n
    where[1] = np.count_nonzero(a[:stop] == 0)


@SETTINGS
@given(arrays("float32", st.integers(1, 30), elements=st.sampled_from([-1.5, 0.0, 0.0, 1.0, 2.0, 3.0])))
def test_for_break_continue(a: np.ndarray) -> None:
    check_kernel(search_module.build(), first_negative_ref, len(a), a, np.zeros(2, np.int32))


# ------------------------------------------------------------------------------------------------ conditions
LOW, HIGH = -3, 4
CLAMP = True
DEBUG = False

with hidet.script_module() as cond_module:

    @hidet.script
    def conditions(n: i32, a: "i32[n]", b: "i32[n]", out: "i32[n, 4]"):  # noqa: F821
        attrs.func_kind = "public"
        for i in range(n):
            out[i, 0] = LOW <= a[i] < HIGH  # chained comparison on IR values
            out[i, 1] = a[i] < b[i] or a[i] == 0 and not b[i] != 1  # and/or/not precedence
            out[i, 2] = a[i] if a[i] > b[i] else b[i] * 2  # conditional expression
            if CLAMP:  # static if on a host value: only the taken branch becomes IR
                out[i, 3] = min(max(a[i], LOW), HIGH)
            else:
                out[i, 3] = undefined_name  # noqa: F821 - never parsed: CLAMP is True
            if DEBUG and a[i] > 0:  # a host False short-circuits the IR operand away
                out[i, 3] = 1000


def conditions_ref(n: int, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    out[:, 0] = (LOW <= a) & (a < HIGH)
    out[:, 1] = (a < b) | ((a == 0) & ~(b != 1))
    out[:, 2] = np.where(a > b, a, b * 2)
    out[:, 3] = np.clip(a, LOW, HIGH)


@SETTINGS
@given(st.integers(1, 25).flatmap(lambda n: st.tuples(
    arrays("int32", n, elements=st.integers(-6, 6)), arrays("int32", n, elements=st.integers(-6, 6)))))
def test_comparisons_boolean_ops_and_conditional_expressions(ab: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = ab
    check_kernel(cond_module.build(), conditions_ref, len(a), a, b, np.zeros((len(a), 4), np.int32))


def test_static_if_leaves_only_the_taken_branch() -> None:
    text = str(cond_module.ir_module())
    assert "1000" not in text and "min(" in text
