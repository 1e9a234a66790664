"""Calling a compiled function with bad arguments: a TypeError/ValueError naming the parameter, before any C runs.

The kernel counts its calls in `calls[0]` first thing, so a test can tell that no C code ran.
"""

import dataclasses
import inspect
import os
import re
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

import codegen
import codegen.runtime.argument_checks
import hidet_lang as hidet
from codegen.runtime.arguments import make_caller
from codegen.runtime.arrays import DeviceArray
from hidet_lang import attrs, bf16, boolean, f16, f32, i8, i16, i32, i64, u8, u16, u32, u64
from hidet_lang.cuda import threadIdx
from hidet_lang.testing import DLPackOnly

with hidet.script_module() as module:

    @hidet.script
    def kernel(calls: i32[1], n: i32, a: "f32[n]", b: f32[2, 3], k: u8, h: f16):  # noqa: F821
        attrs.func_kind = "public"
        calls[0] += 1
        for i in range(n):
            a[i] = a[i] + f32(k) + f32(h)
        b[1, 2] = 7.0


class Unviewable:
    """An object whose DLPack export fails (as a tensor on another device, or one numpy has no dtype for)."""

    def __dlpack__(self, **kwargs: object) -> object:
        raise BufferError("no view")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def good_args() -> dict[str, object]:
    return {"calls": np.zeros(1, np.int32), "n": 3, "a": np.zeros(3, np.float32),
            "b": np.zeros((2, 3), np.float32), "k": 4, "h": 0.5}


def test_good_call_runs() -> None:
    args = good_args()
    module.build()(*args.values())
    assert args["calls"][0] == 1
    np.testing.assert_array_equal(args["a"], np.full(3, 4.5, np.float32))
    assert args["b"][1, 2] == 7.0


def test_keyword_arguments_use_the_dsl_names() -> None:
    args = good_args()
    caller = module.build()["kernel"]  # the function's caller; `m(...)` itself forwards positional arguments
    caller(**args)
    assert args["calls"][0] == 1
    assert caller.__doc__ == "Call the compiled function kernel(calls, n, a, b, k, h)."


with hidet.script_module() as returning_module:

    @hidet.script
    def total(a: f32[3], scale: i32) -> f32:
        attrs.func_kind = "public"
        a[0] = 0.5
        return (a[0] + a[1] + a[2]) * f32(scale)


def test_a_public_function_returns_its_result_after_writing_its_arrays() -> None:
    a = np.array([9.0, 2.0, 4.0], np.float32)
    assert returning_module.build()(a, 3) == 19.5
    assert a[0] == 0.5


BAD_CALLS = [
    # (what to change, exception, words the message must contain)
    ({"a": np.zeros(3, np.float64)}, TypeError, ["'a'", "float32", "float64"]),
    ({"a": np.zeros(4, np.float32)}, ValueError, ["'a'", "(3,)", "(4,)"]),  # n disagrees with len(a)
    ({"n": 5}, ValueError, ["'a'", "(5,)", "(3,)"]),
    ({"b": np.zeros((3, 2), np.float32)}, ValueError, ["'b'", "(2, 3)", "(3, 2)"]),
    ({"b": np.zeros((3, 2), np.float32).T}, ValueError, ["'b'", "contiguous"]),
    ({"a": np.zeros(6, np.float32)[::2]}, ValueError, ["'a'", "contiguous"]),
    ({"a": 1.5}, TypeError, ["'a'", "float"]),
    ({"a": [0.0, 0.0, 0.0]}, TypeError, ["'a'", "got a list ([0.0, 0.0, 0.0])"]),
    ({"a": DeviceArray((3,), np.dtype(np.float32))}, TypeError,
     ["'a' got an array in GPU memory; this function runs on the CPU: pass a numpy array (x.numpy())"]),
    ({"a": Unviewable()}, TypeError, ["'a'", "got Unviewable, which numpy cannot view without a copy: no view"]),
    ({"h": DLPackOnly(np.zeros(1, np.float16))}, TypeError, ["'h'", "(float16), got DLPackOnly"]),  # not its repr
    ({"n": 2**31}, ValueError, ["'n'", "2147483648", "int32"]),
    ({"n": -(2**31) - 1}, ValueError, ["'n'", "int32"]),
    ({"n": 3.0}, TypeError, ["'n'", "float"]),
    ({"n": True}, TypeError, ["'n'", "bool"]),
    ({"k": 256}, ValueError, ["'k'", "256", "uint8"]),
    ({"k": -1}, ValueError, ["'k'", "uint8"]),
    ({"h": "0.5"}, TypeError, ["'h'", "str"]),
    ({"calls": np.zeros(1, np.int32)[:0]}, ValueError, ["'calls'", "(1,)", "(0,)"]),
]


@pytest.mark.parametrize(("change", "exception", "words"), BAD_CALLS,
                         ids=[f"{next(iter(c))}-{i}" for i, (c, _, _) in enumerate(BAD_CALLS)])
def test_bad_argument(change: dict[str, object], exception: type[Exception], words: list[str]) -> None:
    args = good_args()
    calls = args["calls"]
    args.update(change)
    with pytest.raises(exception) as excinfo:
        module.build()(*args.values())
    message = str(excinfo.value)
    assert message.startswith("kernel(): parameter ")
    for word in words:
        assert word in message, message
    assert calls[0] == 0  # no C code ran




ARGUMENT_KINDS = {"numpy": lambda x: x, "hidet array": hidet.asarray, "DLPack object": DLPackOnly}
WRONG_SHAPES = [(2,), (3,), (6,), (2, 3, 1), (1, 2, 3), (3, 2), (2, 4), ()]
"""Shapes that are not b's (2, 3): fewer dimensions (one matching its first size), more (with size-1 ones), the
same number with other sizes, a scalar."""


@pytest.mark.parametrize("kind", sorted(ARGUMENT_KINDS))
@pytest.mark.parametrize("shape", WRONG_SHAPES, ids=str)
def test_a_wrong_rank_or_shape_is_refused_for_every_kind_of_array(kind: str, shape: tuple[int, ...]) -> None:
    args = good_args()
    guarded = np.zeros(int(np.prod(shape)) + 16, np.float32)  # room past the array: nothing may be written there
    args["b"] = ARGUMENT_KINDS[kind](guarded[:int(np.prod(shape))].reshape(shape))
    got = tuple(getattr(args["b"], "shape", shape))  # the package's arrays hold a scalar as shape (1,)
    with pytest.raises(ValueError, match=re.escape(f"parameter 'b' expects shape (2, 3), got shape {got}")):
        module.build()(*args.values())
    assert args["calls"][0] == 0
    assert not guarded.any()


def test_an_array_of_an_equal_dtype_passes_and_an_emulated_cuda_array_passes_its_host_memory() -> None:
    """The caller's quick test compares dtypes by identity: an equal dtype that is another object (here one with
    metadata) must still pass; so must a 'cuda' array of the emulator, which lives in host memory."""
    args = good_args()
    args["a"] = np.zeros(3, np.dtype(np.float32, metadata={"unit": "m"}))
    host = np.zeros((2, 3), np.float32)
    args["b"] = DeviceArray(host.shape, host.dtype, host.ctypes.data, host)
    module.build()(*args.values())
    np.testing.assert_array_equal(args["a"], np.full(3, 4.5, np.float32))
    assert host[1, 2] == 7.0


def test_read_only_array_is_refused() -> None:
    args = good_args()
    args["a"].flags.writeable = False
    with pytest.raises(ValueError, match=r"parameter 'a' .*read-only"):
        module.build()(*args.values())
    assert args["calls"][0] == 0


@pytest.mark.parametrize("count", [0, 5, 7])
def test_wrong_number_of_arguments(count: int) -> None:
    args = list(good_args().values())
    calls = args[0]
    args = (args + [1, 2])[:count]
    with pytest.raises(TypeError, match=re.escape("kernel()")) as excinfo:
        module.build()(*args)
    message = str(excinfo.value)
    assert "argument" in message
    if count < 6:  # Python names the first missing parameter by its DSL name
        missing = ["calls", "n", "a", "b", "k", "h"][count]
        assert f"'{missing}'" in message
    assert calls[0] == 0


def test_f16_scalar_parameter_arrives_as_half_precision() -> None:
    args = good_args()
    args["h"] = 1.0009765625  # 1 + 2**-10: one f16 ulp above 1, rounds to itself
    args["k"] = 0
    module.build()(*args.values())
    np.testing.assert_array_equal(args["a"], np.full(3, np.float32(np.float16(1.0009765625))))
    args = good_args()
    args["h"] = 1.0001  # rounds to 1.0 in f16
    args["k"] = 0
    module.build()(*args.values())
    np.testing.assert_array_equal(args["a"], np.ones(3, np.float32))


def test_parameter_types() -> None:
    assert [p.type for p in module.ir_module().lookup("kernel").params][4:] == [u8, f16]


def runtime_frames(error: BaseException) -> list[tuple[str, str]]:
    """The traceback frames of `error` in the runtime (codegen and the generated callers)."""
    return [(Path(f.filename).name, f.name) for f in traceback.extract_tb(error.__traceback__)
            if f.filename.startswith(("<hidet_lang", str(Path(codegen.__file__).parent) + os.sep))]


def test_a_bad_call_leaves_through_the_entry_point_alone() -> None:
    args = good_args()
    args["b"] = np.zeros((3, 2), np.float32)
    built = module.build()
    with pytest.raises(ValueError) as excinfo:
        built(*args.values())
    assert runtime_frames(excinfo.value) == [("module.py", "__call__")]
    with pytest.raises(ValueError) as excinfo:
        built["kernel"](*args.values())
    assert runtime_frames(excinfo.value) == [("<hidet_lang caller of kernel>", "kernel")]


def test_the_direct_function_is_offered_only_for_tensor_parameters() -> None:
    assert module.build().direct_function() is None  # scalars need their conversions and range checks
    with hidet.script_module() as tensors_only:

        @hidet.script
        def double(a: f32[4], out: f32[4]):
            attrs.func_kind = "public"
            for i in range(4):
                out[i] = a[i] * 2.0

    direct = tensors_only.build().direct_function()
    a, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    direct(codegen.runtime.argument_checks.array_address(a), codegen.runtime.argument_checks.array_address(out))
    np.testing.assert_array_equal(out, a * 2)
    with pytest.raises(TypeError):
        codegen.runtime.argument_checks.array_address(np.zeros(8, np.float32)[::2])


INT_TYPES = [i8, i16, i32, i64, u8, u16, u32, u64]
INT_NUMPY = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]

with hidet.script_module() as integers_module:

    @hidet.script
    def store_integers(a: i8, b: i16, c: i32, d: i64, e: u8, f: u16, g: u32, h: u64, oa: i8[1], ob: i16[1],
                       oc: i32[1], od: i64[1], oe: u8[1], of: u16[1], og: u32[1], oh: u64[1]):
        attrs.func_kind = "public"
        oa[0] = a
        ob[0] = b
        oc[0] = c
        od[0] = d
        oe[0] = e
        of[0] = f
        og[0] = g
        oh[0] = h


@pytest.mark.parametrize("as_numpy", [False, True], ids=["int", "numpy scalar"])
@pytest.mark.parametrize("end", ["min", "max"])
def test_integer_parameters_take_every_value_of_their_type(end: str, as_numpy: bool) -> None:
    values = [int(getattr(np.iinfo(t), end)) for t in INT_NUMPY]
    args = [t(v) if as_numpy else v for t, v in zip(INT_NUMPY, values)]
    outs = [np.zeros(1, t) for t in INT_NUMPY]
    integers_module.build()(*args, *outs)
    assert [int(out[0]) for out in outs] == values


def _past_the_ends() -> list[tuple[int, int, bool]]:
    """(parameter position, value one past its type's range, as a numpy int64?) for each end of each type."""
    i64_range = range(-(2**63), 2**63)
    cases = []
    for position, t in enumerate(INT_NUMPY):
        for value in (int(np.iinfo(t).min) - 1, int(np.iinfo(t).max) + 1):
            cases += [(position, value, False)] + ([(position, value, True)] if value in i64_range else [])
    return cases


@pytest.mark.parametrize(("position", "value", "as_numpy"), _past_the_ends(), ids=str)
def test_one_past_either_end_of_an_integer_type_is_refused(position: int, value: int, as_numpy: bool) -> None:
    args: list[object] = [0] * 8
    args[position] = np.int64(value) if as_numpy else value
    outs = [np.zeros(1, t) for t in INT_NUMPY]
    name, t = "abcdefgh"[position], INT_TYPES[position]
    with pytest.raises(ValueError, match=re.escape(f"parameter '{name}' = {value} does not fit in {t.name}")):
        integers_module.build()(*args, *outs)


@pytest.mark.parametrize("value", [True, np.bool_(False), None, "1"], ids=repr)
def test_a_float_parameter_refuses_bools_and_non_numbers(value: object) -> None:
    args = good_args()
    args["h"] = value
    with pytest.raises(TypeError, match=re.escape("parameter 'h' expects a number (float16), got")):
        module.build()(*args.values())
    assert args["calls"][0] == 0


@pytest.mark.parametrize("value", [2, np.float32(0.5), np.int16(3), np.float64(-1.5)], ids=repr)
def test_a_float_parameter_takes_ints_and_numpy_numbers(value: object) -> None:
    args = good_args()
    args["h"], args["k"] = value, 0
    module.build()(*args.values())
    np.testing.assert_array_equal(args["a"], np.full(3, np.float32(np.float16(float(value)))))


def test_parameters_named_like_the_callers_helpers_or_the_function_are_passed_in_order() -> None:
    with hidet.script_module() as names_module:

        @hidet.script
        def clash(_c: i32, clash: f32[3], a0: i32, _fn: f32[1]):
            attrs.func_kind = "public"
            clash[0] = f32(_c)
            clash[1] = f32(a0)
            clash[2] = _fn[0]

    out = np.zeros(3, np.float32)
    names_module.build()(5, out, 7, np.array([2.5], np.float32))
    np.testing.assert_array_equal(out, [5, 7, 2.5])


def test_an_empty_array_has_the_null_address() -> None:
    assert codegen.runtime.argument_checks.array_address(np.zeros(0, np.float32)) == 0
    args = good_args()
    args["n"], args["a"] = 0, np.zeros(0, np.float32)
    module.build()(*args.values())
    assert args["calls"][0] == 1 and args["b"][1, 2] == 7.0


def test_bf16_arrays_are_raw_bits_without_ml_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` raises ImportError
    assert codegen.runtime.argument_checks.numpy_dtype(bf16) == np.dtype(np.uint16)


with hidet.script_module() as flag_module:

    @hidet.script
    def flagged(flag: boolean, out: i32[1]):
        attrs.func_kind = "public"
        out[0] = 7 if flag else 3


@pytest.mark.parametrize(("value", "expected"), [(True, 7), (False, 3), (np.True_, 7), (np.False_, 3), (1, 7), (0, 3),
                                                 (2, 7), (np.int8(-1), 7), (np.uint64(0), 3)], ids=repr)
def test_a_bool_parameter_takes_bools_and_integers_as_c_converts_them(value: object, expected: int) -> None:
    out = np.zeros(1, np.int32)
    flag_module.build()(value, out)
    assert out[0] == expected


@pytest.mark.parametrize(("value", "described"), [(1.0, "a float (1.0)"), (None, "a NoneType (None)"),
                                                  ("yes", "a str ('yes')"),
                                                  (np.zeros(2, bool), "a numpy array of bool with shape (2,)")],
                         ids=repr)
def test_a_bool_parameter_refuses_other_values(value: object, described: str) -> None:
    with pytest.raises(TypeError, match=re.escape(f"flagged(): parameter 'flag' expects a bool, got {described}")):
        flag_module.build()(value, np.zeros(1, np.int32))


with hidet.script_module() as computed_shapes_module:

    @hidet.script
    def computed(calls: i32[1], n: i32, m: i32, a: "f32[n - m, n // m + 1]"):  # noqa: F821
        attrs.func_kind = "public"
        calls[0] += 1
        a[n - m - 1, n // m] = f32(n * 10 + m)


@pytest.mark.parametrize(("n", "m"), [(5, 2), (7, 3), (9, 1)])
def test_a_shape_computed_from_earlier_parameters_is_checked_with_this_calls_values(n: int, m: int) -> None:
    calls = np.zeros(1, np.int32)
    shape = (n - m, n // m + 1)
    a = np.zeros(shape, np.float32)
    computed_shapes_module.build()(calls, n, m, a)
    assert calls[0] == 1 and a[-1, -1] == n * 10 + m
    for wrong in ((shape[0] + 1, shape[1]), (shape[0], shape[1] - 1), (shape[1], shape[0])):
        if wrong != shape:
            with pytest.raises(ValueError, match=re.escape(f"parameter 'a' expects shape {shape}, got shape {wrong}")):
                computed_shapes_module.build()(calls, n, m, np.zeros(wrong, np.float32))
    assert calls[0] == 1


with hidet.script_module() as bf16_module:

    @hidet.script
    def widen(x: bf16[4], out: f32[4]):
        attrs.func_kind = "cuda_kernel"  # bf16 is for CUDA functions (here on the emulator, or the GPU's staging)
        attrs.cuda.block_dim = 4
        attrs.cuda.grid_dim = 1
        out[threadIdx.x] = f32(x[threadIdx.x])


def test_a_bf16_parameter_takes_ml_dtypes_arrays_and_their_bit_patterns_and_nothing_else() -> None:
    import ml_dtypes

    values = np.array([1.5, -2.0, 0.0078125, 3.0e38], ml_dtypes.bfloat16)
    for given in (values, values.view(np.uint16)):  # bf16 values, or their bits as uint16
        out = np.zeros(4, np.float32)
        bf16_module.build()(given, out)
        np.testing.assert_array_equal(out, values.astype(np.float32))
    for wrong in (np.float16, np.int16, np.float32):
        with pytest.raises(TypeError, match=re.escape(f"parameter 'x' expects bfloat16, got an array of "
                                                      f"{np.dtype(wrong)}")):
            bf16_module.build()(np.zeros(4, wrong), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=re.escape("parameter 'x' expects shape (4,), got shape (3,)")):
        bf16_module.build()(values.view(np.uint16)[:3], np.zeros(4, np.float32))


def test_bf16_bit_patterns_pass_for_bf16_parameters_only() -> None:
    with hidet.script_module() as half_module:

        @hidet.script
        def halves(x: f16[2]):
            attrs.func_kind = "public"
            x[0] = x[1]

    with pytest.raises(TypeError, match=re.escape("parameter 'x' expects float16, got an array of uint16")):
        half_module.build()(np.zeros(2, np.uint16))


with hidet.script_module() as pointer_module:

    @hidet.script
    def first_to(p: ~f32, value: f32):
        attrs.func_kind = "public"
        p[0] = value


def test_a_pointer_parameter_takes_an_array_of_any_shape_and_checks_the_rest() -> None:
    for array in (np.zeros(1, np.float32), np.zeros((2, 3), np.float32), np.zeros((), np.float32)):
        pointer_module.build()(array, 1.5)
        assert array.reshape(-1)[0] == 1.5
    for wrong, error, words in ((np.zeros(2, np.float64), TypeError, "expects float32, got an array of float64"),
                                (np.zeros(4, np.float32)[::2], ValueError, "must be C-contiguous")):
        with pytest.raises(error, match=re.escape(f"parameter 'p' {words}")):
            pointer_module.build()(wrong, 1.5)


def test_parameter_names_python_cannot_take_are_passed_by_position() -> None:
    """IR made elsewhere than in Python source may name a parameter with a keyword or a non-identifier: the caller
    names it `a<i>`, and the others keep theirs."""
    with hidet.script_module():

        @hidet.script
        def three(x: i32, y: f32, z: i32):
            attrs.func_kind = "public"

    received: list[tuple[object, ...]] = []

    def c_function(*args: object) -> None:
        received.append(args)

    for odd in ("lambda", "x.1", "2x"):
        func = three.ir
        params = (dataclasses.replace(func.params[0], name=odd), *func.params[1:])
        caller = make_caller(dataclasses.replace(func, params=params), c_function, None, on_gpu=False)
        assert list(inspect.signature(caller).parameters) == ["a0", "y", "z"]
        caller(4, z=6, y=0.5)
        assert received.pop() == (4, 0.5, 6)
