"""The runtime side of Hidet's surface: allocation functions taking DSL dtypes, the runtime's arrays as operands of
every operator (`hidet.Tensor` the type of both kinds), Hidet's `IRModule` and `StmtBuilder`, unroll pragmas that
both C compilers read, and the slack and canary after host arrays (a write past the end as Hidet's allocator
tolerates it runs; one past the slack is a `HeapOverrunError` naming the parameter)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
import stdlib_ops as ops
from codegen.runtime.heap_guards import (
    CANARY,
    DATA_ALIGNMENT,
    SLACK_UNIT,
    GuardedBuffer,
    HeapOverrunError,
    guard_of,
)
from codegen.toolchain.headers import INCLUDE_DIR
from hidet_lang import attrs, f32, grid, i32, printf
from hidet_lang.ir import types as T
from hidet_lang.ir.builders import StmtBuilder
from hidet_lang.ir.expr import Var
from hidet_lang.ir.func import FuncAttrs, FuncKind, Function
from hidet_lang.ir.module import IRModule
from stdlib_ops.tensor import DTYPES as OPERATOR_DTYPES
from stdlib_ops.tensor import tensor_of_runtime_array

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
          "float64")
shapes = st.lists(st.integers(0, 5), min_size=0, max_size=3)


def spellings(name: str) -> list:
    """Every way of naming dtype `name`: the DSL type, its short and long names, numpy's dtype and scalar type."""
    dsl = T.dtype_from_name(name)
    return [dsl, dsl.short_name, dsl.name, np.dtype(name), np.dtype(name).type]


# ------------------------------------------------------------------------------------------- allocation dtypes
@settings(max_examples=25, deadline=None)
@given(shape=shapes, name=st.sampled_from(DTYPES), spelling=st.integers(0, 4), fill=st.integers(0, 1))
def test_every_allocation_function_takes_every_dtype_spelling(shape: list, name: str, spelling: int,
                                                              fill: int) -> None:
    dtype = spellings(name)[spelling]
    want = np.dtype(name)
    for made in (hidet.empty(shape, dtype=dtype), hidet.randn(shape, dtype), hidet.rand(shape, dtype)):
        assert made.dtype == want and made.shape == tuple(shape)
    np.testing.assert_array_equal(hidet.zeros(shape, dtype=dtype), np.zeros(shape, want))
    np.testing.assert_array_equal(hidet.ones(shape, dtype), np.ones(shape, want))
    np.testing.assert_array_equal(hidet.full(shape, fill, dtype), np.full(shape, fill, want))
    np.testing.assert_array_equal(hidet.asarray(np.arange(6) % 2, dtype=dtype), (np.arange(6) % 2).astype(want))
    if name in OPERATOR_DTYPES:  # the operators' tensors take the same spellings
        np.testing.assert_array_equal(ops.zeros(shape, dtype).numpy(), np.zeros(shape, want))


def test_bfloat16_by_its_dsl_type_and_names() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for dtype in (hidet.bf16, "bf16", "bfloat16"):
        assert hidet.ones([2], dtype).dtype == np.dtype(ml_dtypes.bfloat16)


def test_rand_is_uniform_in_the_unit_interval_and_randn_takes_hidets_mean_and_stddev() -> None:
    values = hidet.rand([4096], hidet.float64)
    assert values.min() >= 0.0 and values.max() < 1.0 and 0.45 < values.mean() < 0.55  # 11 standard errors apart
    for normal in (hidet.randn([4096], "f64", 5.0, 0.5), np.asarray(ops.randn([4096], "f64", mean=5.0, stddev=0.5))):
        assert 4.95 < normal.mean() < 5.05 and 0.45 < normal.std() < 0.55  # six standard errors or more apart


@pytest.mark.parametrize("bad", ["f33", "tensor", object(), hidet.f32[4]])
def test_what_is_not_a_dtype_is_a_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="not a data type"):
        hidet.empty([2], dtype=bad)


# ------------------------------------------------------------------------------------ one tensor type for ops
def numpy_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@settings(max_examples=3, deadline=None)  # each shape compiles four operators' kernels
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3), data=st.data())
def test_operators_take_the_allocation_functions_arrays(shape: list, data: st.DataObject) -> None:
    axis = data.draw(st.integers(0, len(shape) - 1))
    x, y = hidet.randn(shape), hidet.randn(shape)
    # float32 exp and sums of at most six terms: a few ulps
    np.testing.assert_allclose(hidet.ops.softmax(x, axis).numpy(), numpy_softmax(np.asarray(x), axis), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(hidet.ops.add(x, y).numpy(), np.asarray(x) + np.asarray(y))
    np.testing.assert_array_equal((ops.asarray(np.asarray(x)) * y).numpy(), np.asarray(x) * np.asarray(y))
    np.testing.assert_array_equal(hidet.ops.relu(x[..., ::2]).numpy(), np.maximum(np.asarray(x)[..., ::2], 0))


def operator_calls() -> list[tuple[str, tuple, tuple]]:
    """Each operator called on one, two, and a list of two operands, as the operators' tensors and as the allocation
    functions' arrays: (name, tensor arguments, array arguments), for each form the operator takes."""
    x, y = hidet.randn([2, 3]), hidet.randn([2, 3])
    tx, ty = ops.asarray(np.asarray(x)), ops.asarray(np.asarray(y))
    calls = []
    for name in ops.operators.__all__:
        f = getattr(ops, name)
        if isinstance(f, type) or name == "apply":
            continue
        for tensors, arrays in (((tx,), (x,)), ((tx, ty), (x, y)), (([tx, ty],), ([x, y],))):
            try:
                f(*tensors)
            except (TypeError, ValueError):  # not a form this operator takes
                continue
            calls.append((name, tensors, arrays))
    return calls


def test_every_operator_takes_the_arrays_as_it_takes_its_tensors() -> None:
    calls = operator_calls()
    assert len({name for name, _, _ in calls}) >= 40  # the operators that take these forms: nearly all of them
    for name, tensors, arrays in calls:
        f = getattr(ops, name)
        want, got = f(*tensors), f(*arrays)
        for w, g in zip(*(v if isinstance(v, (list, tuple)) else [v] for v in (want, got))):
            np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=name)


def test_hidet_tensor_is_the_type_of_arrays_and_operator_results() -> None:
    x = hidet.randn([3, 4])
    assert isinstance(x, hidet.Tensor) and isinstance(hidet.empty([2], device="cuda"), hidet.Tensor)
    assert isinstance(hidet.ops.softmax(x, 1), hidet.Tensor)
    assert not isinstance(np.ones(3), hidet.Tensor)


def test_a_compiled_function_takes_an_operator_result_and_an_array() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def twice(x: f32[3, 4], y: f32[3, 4]):
            attrs.func_kind = "cpu_kernel"
            for i, j in grid(3, 4):
                y[i, j] = x[i, j] * 2.0

    x = hidet.ops.softmax(hidet.randn([3, 4]), 1)
    y = hidet.empty([3, 4])
    module.build()(x, y)
    np.testing.assert_array_equal(y, x.numpy() * 2)


# ------------------------------------------------------------------------------------------------ IRModule
@hidet.script
def count_up(a: i32[10]):
    attrs.func_kind = "cpu_kernel"
    p = 0
    for i in range(10):
        a[i] = p
        p = p + 1


@hidet.script
def add_one(x: i32) -> i32:
    attrs.func_kind = "cpu_internal"
    return x + 1


@hidet.script
def count_from_one(a: i32[4]):
    attrs.func_kind = "cpu_kernel"
    for i in range(4):
        a[i] = add_one(i)


def test_an_irmodule_filled_by_add_function_builds() -> None:
    module = IRModule()
    assert module.add_function(count_up.name, count_up) == "count_up"
    a = hidet.empty([10], dtype=hidet.int32).cpu()
    module.build()(a)
    np.testing.assert_array_equal(a.numpy(), np.arange(10))
    assert "def count_up(a: i32[10])" in str(module) and module.lookup("count_up") is count_up.ir


def test_add_function_brings_a_script_functions_callees_and_takes_ir_functions() -> None:
    module = IRModule()
    module.add_function("count_from_one", count_from_one)
    assert list(module.functions) == ["add_one", "count_from_one"]
    again = IRModule(module.ir().functions)  # IR functions, as an iterable
    for built in (again.build(), module.ir().build("cpu")):  # the IR node builds too, as Hidet's modules do
        a = hidet.zeros([4], hidet.i32)
        built(a)
        np.testing.assert_array_equal(a, np.arange(1, 5))


def test_the_ir_modules_are_attributes_as_in_hidet() -> None:
    assert hidet.ir.module.IRModule is IRModule and hidet.ir.builders.StmtBuilder is StmtBuilder
    assert hidet.ir.func.Function is Function
    with pytest.raises(AttributeError, match="has no attribute 'Task'"):
        hidet.ir.Task  # noqa: B018 - the operator library's tasks are stdlib_ops.Task


def test_add_function_refuses_a_second_function_of_a_name_a_wrong_name_and_non_functions() -> None:
    module = IRModule({"count_up": count_up})
    with pytest.raises(ValueError, match="has a function named 'count_up' already"):
        module.add_function("count_up", count_up)
    with pytest.raises(ValueError, match="is called 'add_one', not 'inc'"):
        module.add_function("inc", add_one)
    with pytest.raises(TypeError, match="not a int"):
        module.add_function("x", 3)
    with pytest.raises(KeyError, match="no function 'nope'"):
        module.lookup("nope")


# --------------------------------------------------------------------------------------------- StmtBuilder
def build_function(name: str, params: tuple[Var, ...], body: object) -> object:
    module = IRModule([Function(name, params, T.void, body, FuncAttrs(kind=FuncKind.CPU_KERNEL))])
    return module.build()


@settings(max_examples=5, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 7), low=st.integers(0, 7), high=st.integers(0, 7))
def test_stmt_builder_loops_and_if_chains(rows: int, cols: int, low: int, high: int) -> None:
    out = Var("out", T.int32[rows, cols])
    sb = StmtBuilder()
    with sb.for_grid([rows, cols]) as (i, j):
        with sb.if_then(j < low):
            sb.buffer_store(out, [i, j], i * 10 + j)
        with sb.else_if(j < high):
            sb.buffer_store(out, [i, j], -1)
        with sb.otherwise():
            sb.buffer_store(out, [i, j], -2)
    got = hidet.zeros([rows, cols], hidet.int32)
    build_function("fill", (out,), sb.finish())(got)
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    np.testing.assert_array_equal(got, np.where(j < low, i * 10 + j, np.where(j < high, -1, -2)))


def test_stmt_builder_variables_while_break_and_unrolled_loops() -> None:
    out = Var("out", T.int32[8])
    sb = StmtBuilder()
    n = sb.declare_var("n", T.int32, 0)
    with sb.while_loop(n < 100):
        with sb.if_then(n == 5):
            sb.brk()
        sb.buffer_store(out, [n], n * n)
        sb.assign(n, n + 1)
    with sb.for_loop("k", 3, attr="u+") as k:
        sb += [printf("%d\n", k)]
        sb.buffer_store(out, [k + 5], k + 100)
    body = sb.finish()
    got = hidet.zeros([8], hidet.int32)
    compiled = build_function("steps", (out,), body)
    compiled(got)
    np.testing.assert_array_equal(got, [0, 1, 4, 9, 16, 100, 101, 102])
    assert "#pragma GCC unroll 65534" in compiled.source()


def test_stmt_builder_misuse_is_reported() -> None:
    sb = StmtBuilder()
    with pytest.raises(RuntimeError, match="must follow an if_then"):
        with sb.otherwise():
            pass
    scope = sb.for_range(4)
    scope.__enter__()
    with pytest.raises(RuntimeError, match="1 scope"):
        sb.finish()
    with pytest.raises(TypeError, match="not a str"):
        sb.append("printf")
    with pytest.raises(ValueError, match="attrs"):
        sb.for_loop("i", 4, attr="x")


# ----------------------------------------------------------------------------------------------- unrolling
def test_unrolled_cpu_loops_carry_both_compilers_pragmas_and_gcc_reads_its_own() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def unrolled(out: i32[16]):
            attrs.func_kind = "cpu_kernel"
            for i in grid(10, attrs="u"):
                out[i] = i
            for i in grid(4, attrs="u+"):
                out[10 + i] = 2 * i
            for i in grid(2, attrs="u2"):
                out[14 + i] = 3 * i

    compiled = module.build()
    out = hidet.zeros([16], hidet.int32)
    compiled(out)
    np.testing.assert_array_equal(out, [*range(10), 0, 2, 4, 6, 0, 3])
    source = compiled.source()
    assert "#pragma unroll 64" in source and "#pragma unroll\n" in source and "#pragma unroll 2" in source
    assert "#pragma GCC unroll 64" in source and "#pragma GCC unroll 65534" in source
    # -Wunknown-pragmas would name a pragma GCC reads but does not know: it sees only its own spelling
    check = subprocess.run(["cc", "-x", "c", "-std=gnu11", "-fsyntax-only", "-Wall", "-Werror", "-fopenmp",
                            "-I", str(INCLUDE_DIR), "-"], input=source, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


# -------------------------------------------------------------------------------------------- heap guards
with hidet.script_module() as vector_add_module:

    @hidet.script
    def vector_add(a: f32[3], b: f32[3], c: f32[3], count: i32):
        attrs.func_kind = "public"
        for i in range(count):
            c[i] = a[i] + b[i]


@settings(max_examples=20, deadline=None)
@given(shape=shapes, name=st.sampled_from(DTYPES))
def test_host_arrays_have_slack_to_a_page_multiple_and_an_intact_canary(shape: list, name: str) -> None:
    array = hidet.empty(shape, name)
    guard = guard_of(array)
    assert type(guard) is GuardedBuffer and guard.canary_intact()
    data = len(guard) - len(CANARY)
    assert data % SLACK_UNIT == 0 and data >= max(array.nbytes, 1) and data - max(array.nbytes, 1) < SLACK_UNIT
    assert array.ctypes.data == guard.ctypes.data
    assert array.ctypes.data % DATA_ALIGNMENT == 0  # a cache line's start: vector accesses touch one line each
    assert guard_of(array.reshape(-1)[1:]) is guard and guard_of(array.reshape(-1)) is guard
    assert guard_of(np.ones(3)) is None


def test_a_tensors_copy_of_an_array_starts_on_a_cache_line() -> None:
    # the operator library's constants (a graph's packed weights) are such copies: numpy's own start a large
    # array 16 bytes past a page, which made every 64-byte vector load of a weight panel touch two cache lines
    import stdlib_ops as ops

    source = np.arange(100_000, dtype=np.float32)
    storage = ops.asarray(source).storage  # the tensor's own array, not a copy
    assert storage.ctypes.data % DATA_ALIGNMENT == 0 and guard_of(storage) is not None
    np.testing.assert_array_equal(storage, source)


def test_writing_a_little_past_the_end_runs_as_in_hidet() -> None:
    a, b, c = hidet.randn([3]), hidet.randn([3]), hidet.empty([3])
    vector_add_module.build()(a, b, c, 10)  # Hidet's vector-addition tutorial loops over range(10)
    np.testing.assert_array_equal(c, np.asarray(a) + np.asarray(b))
    assert all(guard_of(v).canary_intact() for v in (a, b, c))  # the writes past the end stayed in the slack


@pytest.mark.parametrize("wrap", ["array", "view", "tensor"])
def test_writing_past_the_slack_is_an_error_naming_the_parameter(wrap: str) -> None:
    a, b, c = hidet.randn([3]), hidet.randn([3]), hidet.zeros([3])
    given_c = {"array": c, "view": c[0:3], "tensor": tensor_of_runtime_array(c)}[wrap]
    run = vector_add_module.build()
    past_slack = SLACK_UNIT // 4 + 10  # f32 elements: ten of them land in the canary, none beyond it
    with pytest.raises(HeapOverrunError, match=r"vector_add\(\): wrote past the end of the array given for "
                                               r"parameter 'c' \(float32 \[3\]\), beyond the 4096 bytes"):
        run(a, b, given_c, past_slack)
    assert guard_of(c).canary_intact()  # restored: the array is usable, and checked, again
    run(a, b, given_c, 3)
    np.testing.assert_array_equal(c, np.asarray(a) + np.asarray(b))


def test_plain_numpy_arrays_run_as_before() -> None:
    a, b, c = (np.ones(3, np.float32) for _ in range(3))
    vector_add_module.build()(a, b, c, 3)
    np.testing.assert_array_equal(c, 2 * np.ones(3))


def fill_with_multiples(out: Var, n: int, factor: int) -> object:
    """Statements, built by a host helper, storing `factor * i` into `out[i]` for i < n."""
    sb = StmtBuilder()
    with sb.for_loop("i", n) as i:
        sb.buffer_store(out, [i], i * factor)
    return sb.finish()


@settings(max_examples=5, deadline=None)
@given(n=st.integers(1, 9), factor=st.integers(-5, 5))
def test_a_statement_a_host_helper_returns_is_inserted_where_it_is_called(n: int, factor: int) -> None:
    with hidet.script_module() as module:

        @hidet.script
        def fill(out: i32[n]):
            attrs.func_kind = "public"
            fill_with_multiples(out, n, factor)

    got = hidet.zeros([n], hidet.int32)
    module.build()["fill"](got)
    np.testing.assert_array_equal(got, np.arange(n) * factor)
