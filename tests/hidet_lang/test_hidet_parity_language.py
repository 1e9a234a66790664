"""The parts of Hidet Script's language that Hidet's own programs use: slices of host lists and tuples in a kernel
(`shape[1:]`, `indices[:axis]`), one loop name bound to the list of a grid's or a task mapping's indices
(`grid([m, n])`, `grid(n, bind_tuple=True)`, `mapping.on(w, bind_tuple=True)`), chained indexing `a[i][j]` (a
tensor indexed in fewer dimensions than it has is its row), errors of Python code run while compiling reported at
the kernel's line with the original error chained, a view larger than its tensor refused by the build, and
`hidet.lang` as the package itself."""

import inspect
import os
import re
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import as_tensor_pointer, attrs, column_major, f32, grid, i32, meta, register_tensor, spatial, view
from hidet_lang.cuda import blockIdx, threadIdx
from hidet_lang.errors import DSLError, DSLSyntaxError, DSLTypeError, DSLValueError
from hidet_lang.testing import arrays, example_count

PACKAGE_DIR = os.path.dirname(os.path.abspath(hidet.__file__)) + os.sep


def line_of(marker: str) -> int:
    """The line of this file that ends with the comment `# MARK: <marker>`."""
    lines = inspect.getsource(sys.modules[__name__]).splitlines()
    return next(k for k, line in enumerate(lines, start=1) if line.rstrip().endswith(f"# MARK: {marker}"))


# ------------------------------------------------------------------------------------------------ slices of host values


def host_slices_module(shape: list[int], axis: int):
    """A kernel writing `shape[:axis]`, `shape[axis:]`, `shape[::2]`, `shape[::-1]` and a slice of a tuple of
    them into `out`, one group after the other."""
    dims = tuple(shape)
    with hidet.script_module() as module:

        @hidet.script
        def slices(out: i32[32]):
            attrs.func_kind = "public"
            k = 0
            for part in [shape[:axis], shape[axis:], shape[::2], shape[::-1], dims[1:-1]]:
                for v in part:
                    out[k] = v
                    k += 1

    return module


@settings(max_examples=example_count(4), deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=5), st.data())
def test_slices_of_host_lists_and_tuples_are_python_slices(shape: list[int], data: st.DataObject) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape)))
    out = np.full(32, -1, np.int32)
    host_slices_module(shape, axis).build()(out)
    expected = [*shape[:axis], *shape[axis:], *shape[::2], *shape[::-1], *tuple(shape)[1:-1]]
    np.testing.assert_array_equal(out[:len(expected)], expected)
    assert (out[len(expected):] == -1).all()


def index_slices_module(m: int, n: int, p: int, axis: int):
    """`total[indices[:axis] + indices[axis + 1:]] += a[indices]`: the sum of `a` over `axis`, as Hidet's
    reductions write it with the list a one-name grid loop binds."""
    with hidet.script_module() as module:

        @hidet.script
        def reduce_axis(a: f32[m, n, p], total: f32[[m, n, p][:axis] + [m, n, p][axis + 1:]]):
            attrs.func_kind = "public"
            for indices in grid([m, n, p]):
                total[indices[:axis] + indices[axis + 1:]] += a[indices]

    return module


@settings(max_examples=example_count(4), deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5), st.integers(0, 2), st.data())
def test_slices_of_the_indices_a_loop_binds_index_tensors(m: int, n: int, p: int, axis: int,
                                                          data: st.DataObject) -> None:
    a = data.draw(arrays("float32", (m, n, p)))
    total = np.zeros([m, n, p][:axis] + [m, n, p][axis + 1:], np.float32)
    index_slices_module(m, n, p, axis).build()(a, total)
    expected = np.zeros_like(total)
    for k in range(a.shape[axis]):  # the kernel's order of additions, in float32: bitwise equal
        expected += np.take(a, k, axis=axis)
    np.testing.assert_array_equal(total, expected)


def max_over_axis_module(shape: list[int], axis: int):
    """The max of `x` over `axis`, with the indices of `x` made as Hidet's softmax makes them: the list a loop
    binds, sliced, around a tuple (`indices[:axis] + (k,) + indices[axis:]`)."""
    kept = shape[:axis] + shape[axis + 1:]
    with hidet.script_module() as module:

        @hidet.script
        def max_over_axis(x: f32[shape], out: f32[kept]):
            attrs.func_kind = "public"
            for indices in grid(kept):
                out[indices] = -1e30
                for k in range(shape[axis]):
                    out[indices] = max(out[indices], x[indices[:axis] + (k,) + indices[axis:]])

    return module


@settings(max_examples=example_count(4), deadline=None)
@given(st.lists(st.integers(1, 4), min_size=2, max_size=3), st.data())
def test_a_list_and_a_tuple_of_indices_concatenate_as_in_hidet(shape: list[int], data: st.DataObject) -> None:
    axis = data.draw(st.integers(0, len(shape) - 1))
    x = data.draw(arrays("float32", tuple(shape)))
    out = np.zeros(shape[:axis] + shape[axis + 1:], np.float32)
    max_over_axis_module(shape, axis).build()(x, out)
    np.testing.assert_array_equal(out, x.max(axis=axis))


def test_a_slice_with_kernel_bounds_is_refused_at_its_line() -> None:
    shape = [4, 5, 6]
    with pytest.raises(DSLSyntaxError, match=r"bounds of a slice of a Python list or tuple must be Python values") \
            as info:

        @hidet.script
        def bad(n: i32, out: i32[4]):
            attrs.func_kind = "public"
            out[0] = len(shape[:n])  # MARK: slice with a kernel bound

    assert info.value.span.line == line_of("slice with a kernel bound")


# ------------------------------------------------------------------------------------------------ one name, all indices

with hidet.script_module() as bind_tuple_module:

    @hidet.script
    def bound_lists(two: f32[3, 4], one: f32[5], listed: f32[6], tasks: f32[4, 8], coords: f32[2, 16]):
        attrs.func_kind = "public"
        for ij in grid([3, 4], bind_tuple=True):
            two[ij] = f32(ij[0] * 10 + ij[1])
        for idx in grid(5, bind_tuple=True):  # a list of one index
            one[idx] = f32(idx[0] + len(idx))
        for idx in grid([6]):  # extents given as a list: a list of one index, as in Hidet
            listed[idx[0]] = f32(2 * idx[0])
        for w in range(32):
            for task in spatial(4, 8).on(w, bind_tuple=True):
                tasks[task] = f32(w)
        for w in range(32):
            for task in spatial(2, 16).on(w):  # one name over two coordinates: their list
                coords[task[0], task[1]] = f32(task[0] * 100 + task[1])
        for t in spatial(5).on(0):  # one name, one coordinate, no bind_tuple: the index itself
            one[t] += 100.0


def test_one_loop_name_binds_the_list_of_indices() -> None:
    two, one, listed = np.zeros((3, 4), np.float32), np.zeros(5, np.float32), np.zeros(6, np.float32)
    tasks, coords = np.zeros((4, 8), np.float32), np.zeros((2, 16), np.float32)
    bind_tuple_module.build()(two, one, listed, tasks, coords)
    i, j = np.indices((3, 4))
    np.testing.assert_array_equal(two, i * 10 + j)
    expected_one = np.arange(5) + 1.0
    expected_one[0] += 100.0
    np.testing.assert_array_equal(one, expected_one)
    np.testing.assert_array_equal(listed, 2 * np.arange(6))
    np.testing.assert_array_equal(tasks, np.arange(32).reshape(4, 8))
    np.testing.assert_array_equal(coords, np.arange(2)[:, None] * 100 + np.arange(16)[None, :])


def test_a_grid_loop_with_the_wrong_number_of_names_says_so() -> None:
    with pytest.raises(DSLValueError, match=r"grid has 3 dimension\(s\) but the loop names 2 variable\(s\)"):

        @hidet.script
        def bad(out: f32[2, 3, 4]):
            attrs.func_kind = "public"
            for i, j in grid([2, 3, 4], bind_tuple=True):
                out[i, j, 0] = 1.0

    with pytest.raises(DSLValueError, match=r"tasks have 2 coordinate\(s\) but the loop names 3 variable\(s\)"):

        @hidet.script
        def bad_mapping(out: f32[4, 8]):
            attrs.func_kind = "public"
            for i, j, _k in spatial(4, 8).on(0, bind_tuple=True):
                out[i, j] = 1.0


# ------------------------------------------------------------------------------------------------ chained indexing


def chained_module(m: int, n: int, p: int):
    """Reads and stores through `a[i][j]`, `c[i][j][k]`, `c[i][j, k]`, `c[i, j][k]`, and a row `a[i]` passed to
    a function taking a tensor."""
    with hidet.script_module() as module:

        @hidet.script
        def row_total(row: f32[n]) -> f32:
            attrs.func_kind = "cpu_internal"
            s = 0.0
            for j in range(n):
                s += row[j]
            return s

        @hidet.script
        def chained(a: f32[m, n], b: f32[m, n], c: f32[m, n, p], sums: f32[m]):
            attrs.func_kind = "public"
            for i, j in grid(m, n):
                b[i][j] = a[i][j] * 2.0
                b[i][j] += 1.0
                for k in range(p):
                    c[i][j][k] = a[i][j] + f32(k)
                    c[i][j, k] += 1.0
                    c[i, j][k] *= 2.0
            for i in range(m):
                sums[i] = row_total(a[i])

    return module


@settings(max_examples=example_count(4), deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(1, 4), st.data())
def test_chained_indexing_reads_and_stores_elements(m: int, n: int, p: int, data: st.DataObject) -> None:
    a = data.draw(arrays("float32", (m, n)))
    b, c, sums = np.zeros((m, n), np.float32), np.zeros((m, n, p), np.float32), np.zeros(m, np.float32)
    chained_module(m, n, p).build()(a, b, c, sums)
    np.testing.assert_array_equal(b, a * np.float32(2) + np.float32(1))
    np.testing.assert_array_equal(c, ((a[:, :, None] + np.arange(p, dtype=np.float32)) + np.float32(1)) *
                                  np.float32(2))
    running = np.zeros(m, np.float32)
    for j in range(n):  # the callee's order of additions, in float32: bitwise equal
        running += a[:, j]
    np.testing.assert_array_equal(sums, running)


with hidet.script_module() as run_time_rows_module:

    @hidet.script
    def mirror_rows(m: i32, n: i32, x: f32[64], out: f32[64]):
        attrs.func_kind = "public"
        source = as_tensor_pointer(x, f32, [m, n])  # extents known only at run time
        target = as_tensor_pointer(out, f32, [m, n])
        for i in range(m):
            for j in range(n):
                target[i][j] = source[i][n - 1 - j] * 2.0


@settings(max_examples=example_count(4), deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), arrays("float32", (64,)))
def test_chained_indexing_of_a_tensor_with_run_time_extents(m: int, n: int, x: np.ndarray) -> None:
    out = np.zeros(64, np.float32)
    run_time_rows_module.build(check=True)(m, n, x, out)  # the checking mode: every access within its tensor
    rows = x[:m * n].reshape(m, n)
    np.testing.assert_array_equal(out[:m * n].reshape(m, n), rows[:, ::-1] * np.float32(2))
    assert (out[m * n:] == 0).all()


with hidet.script_module() as chained_cuda_module:

    @hidet.script
    def chained_cuda(a: f32[4, 32], out: f32[4, 32]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.grid_dim = 4
        attrs.cuda.block_dim = 32
        out[blockIdx.x][threadIdx.x] = a[blockIdx.x][31 - threadIdx.x] + 1.0


def test_chained_indexing_in_a_cuda_kernel() -> None:
    a = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    out = hidet.zeros([4, 32], "float32", device="cuda")
    chained_cuda_module.build()(hidet.asarray(a, device="cuda"), out)
    np.testing.assert_array_equal(out.numpy(), a[:, ::-1] + np.float32(1))


def test_a_row_used_as_a_number_says_to_index_every_dimension() -> None:
    with pytest.raises(DSLTypeError, match=r"is a part of a tensor .* index every dimension, e\.g\. a\[i, j\]") \
            as info:

        @hidet.script
        def bad(a: f32[4, 4], out: f32[4]):
            attrs.func_kind = "public"
            out[0] = a[1] * 2.0  # MARK: row as a number

    assert info.value.span.line == line_of("row as a number")


def test_a_tensor_with_a_layout_is_indexed_in_all_its_dimensions_at_once() -> None:
    with pytest.raises(DSLSyntaxError, match=r"a tensor with a layout \(.*\) cannot be sliced or partly indexed; "
                                             r"index all its 2 dimensions at once") as info:

        @hidet.script
        def bad(out: f32[4, 4]):
            attrs.func_kind = "public"
            tiles = register_tensor(f32, layout=column_major(4, 4))
            tiles[0][1] = 1.0  # MARK: partial index of a layout tensor
            out[0, 0] = tiles[0, 1]

    assert info.value.span.line == line_of("partial index of a layout tensor")


# ------------------------------------------------------------------------------------------------ errors of host code


class ConfigError(Exception):
    """An error of the user's own kind, raised by a helper below."""


def read_config(name: str) -> int:
    """A helper a kernel calls while compiling, raising an error of the user's own kind."""
    raise ConfigError(f"no setting {name!r}")


def lookup(table: dict, key: str) -> int:
    """A helper raising KeyError from the user's code."""
    return table[key]


class Shape:
    """A host value whose property raises."""

    @property
    def rank(self) -> int:
        raise RuntimeError("rank is not known yet")


def missing_file() -> None:
    @hidet.script
    def kernel(a: f32[4]):
        attrs.func_kind = "public"
        a[0] = f32(len(open("/nonexistent/hidet-parity-config").read()))  # MARK: missing_file


def own_error() -> None:
    @hidet.script
    def kernel(a: f32[4]):
        attrs.func_kind = "public"
        a[0] = f32(read_config("tile"))  # MARK: own_error


def key_error() -> None:
    @hidet.script
    def kernel(a: f32[4]):
        attrs.func_kind = "public"
        a[0] = f32(lookup({"m": 4}, "n"))  # MARK: key_error


def property_error() -> None:
    shape = Shape()

    @hidet.script
    def kernel(a: f32[4]):
        attrs.func_kind = "public"
        a[0] = f32(shape.rank)  # MARK: property_error


@pytest.mark.parametrize(("factory", "original", "message", "user_frame"), [
    (missing_file, FileNotFoundError, "FileNotFoundError raised by Python code run while compiling", None),
    (own_error, ConfigError, "ConfigError raised by Python code run while compiling the kernel: no setting 'tile'",
     "read_config"),
    (key_error, KeyError, "KeyError raised by Python code run while compiling the kernel: 'n'", "lookup"),
    (property_error, RuntimeError, "RuntimeError raised by Python code run while compiling the kernel: rank is not "
                                   "known yet", "rank"),
], ids=["OSError", "own class", "KeyError", "property"])
def test_an_error_of_host_code_is_a_dsl_error_at_the_kernel_line(factory, original: type, message: str,
                                                                   user_frame: str | None) -> None:
    with pytest.raises(DSLError) as info:
        factory()
    error = info.value
    assert message in error.message
    assert error.span is not None and error.span.line == line_of(factory.__name__)
    assert os.path.samefile(error.span.file, __file__)
    assert type(error.__cause__) is original
    frames = traceback.extract_tb(error.__cause__.__traceback__)
    assert all(not os.path.abspath(f.filename).startswith(PACKAGE_DIR) for f in frames), frames
    assert [f.name for f in frames] == ([] if user_frame is None else [user_frame])
    compiler_frames = [f.name for f in traceback.extract_tb(error.__traceback__)
                       if os.path.abspath(f.filename).startswith(PACKAGE_DIR)]
    assert compiler_frames == ["script"]  # the decorator, the entry point, and none of the parser's frames


# --------------------------------------------------------------------------------------- views larger than their tensor


def test_a_view_larger_than_its_tensor_is_refused_by_the_build_not_by_the_decorator() -> None:
    @hidet.script
    def oversized(a: f32[16], i: i32):
        attrs.func_kind = "public"
        v = view(a, f32[64])  # MARK: oversized view
        v[i] = 1.0

    with pytest.raises(DSLTypeError, match=re.escape("view() of 'a' (f32[16]) (64 bytes) as f32[64] (256 bytes)")) \
            as info:
        oversized.build()
    assert info.value.span.line == line_of("oversized view")


with hidet.script_module() as run_time_view_module:

    @hidet.script
    def run_time_view(n: i32, a: f32[16], i: i32):
        attrs.func_kind = "public"
        v = as_tensor_pointer(a, f32, [n])  # as large as `n` says, which only the run knows
        v[i] = 1.0  # MARK: run-time view store


def test_the_checking_mode_catches_an_access_past_a_run_time_sized_view() -> None:
    a = np.zeros(16, np.float32)
    built = run_time_view_module.build(check=True)
    built(64, a, 15)
    assert a[15] == 1.0
    with pytest.raises(IndexError, match=rf":{line_of('run-time view store')}: index 40 is out of bounds for 'v'"):
        built(64, a, 40)


# ----------------------------------------------------------------------------------------------------------- hidet.lang


def test_hidet_lang_is_the_package_itself() -> None:
    assert hidet.lang is hidet
    assert hidet.lang.f32 is f32 and hidet.lang.meta is meta
    with hidet.lang.script_module() as module:

        @hidet.lang.script
        def fill(out: hidet.lang.f32[3]):
            hidet.lang.attrs.func_kind = "public"
            for i in hidet.lang.grid(3):
                out[i] = 7.0

    out = np.zeros(3, np.float32)
    module.build()(out)
    np.testing.assert_array_equal(out, 7.0)


def double(x: hidet.Tensor) -> hidet.Tensor:  # annotations evaluated when this file is imported (no lazy annotations)
    """A host function of a Hidet program, annotated with Hidet's tensor type."""
    return x


def test_hidet_tensor_annotations_evaluate_when_a_program_is_imported(tmp_path: Path) -> None:
    assert double.__annotations__["x"] is hidet.Tensor
    assert isinstance(hidet.zeros([2], "float32"), hidet.Tensor)
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent("""
        import hidet_lang as hidet

        def host(x: hidet.Tensor, scale: float) -> hidet.Tensor:
            return x

        assert isinstance(hidet.asarray([1.0, 2.0]), host.__annotations__["x"])
        print(hidet.lang.f32)
    """))
    root = str(Path(hidet.__file__).resolve().parent.parent)
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "f32"
