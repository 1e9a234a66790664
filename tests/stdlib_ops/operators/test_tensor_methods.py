"""torch's tensor methods on every tensor the project returns (operators' results and the allocation functions'
arrays), checked against torch on drawn data: `.to(...)` in its positional and keyword forms, `.cpu()`, `.cuda()`
(the CUDA emulator here), `.float()`, `.half()`, `.bfloat16()`, `.item()`, `.tolist()`, and `//` and `%` with
torch's floored semantics (negative operands, integer and float dtypes, division by zero)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
import stdlib_ops as ops
from codegen.runtime.arrays import DeviceArray, HostArray
from hidet_lang.testing import arrays, example_count

torch = pytest.importorskip("torch")

INT_DTYPES = ("int8", "int32", "int64", "uint8")
FLOAT_DTYPES = ("float32", "float64")


def _operands(dtype: str) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    """Two arrays of one drawn shape and `dtype`, negative values included; integer divisors are never zero."""
    def pair(shape: tuple[int, ...]) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
        if dtype in INT_DTYPES:
            info = np.iinfo(dtype)
            low, high = max(int(info.min), -1000), min(int(info.max), 1000)
            dividend = st.integers(low, high)
            divisor = st.integers(low, high).filter(bool)
        else:
            width = 8 * np.dtype(dtype).itemsize
            dividend = st.floats(-1e6, 1e6, width=width)
            divisor = st.floats(-1e3, 1e3, width=width).filter(lambda v: abs(v) > 1e-3)
        return st.tuples(arrays(dtype=dtype, shape=st.just(shape), elements=dividend),
                         arrays(dtype=dtype, shape=st.just(shape), elements=divisor))
    return st.tuples(st.integers(1, 4), st.integers(1, 5)).flatmap(pair)


@pytest.mark.parametrize("dtype", INT_DTYPES + FLOAT_DTYPES)
def test_floor_divide_and_remainder_match_torch(dtype: str) -> None:
    @settings(max_examples=example_count(15), deadline=None)
    @given(_operands(dtype))
    def check(pair: tuple[np.ndarray, np.ndarray]) -> None:
        a, b = pair
        x, y = ops.asarray(a), ops.asarray(b)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        np.testing.assert_array_equal((x // y).numpy(), (ta // tb).numpy())
        np.testing.assert_array_equal((x % y).numpy(), (ta % tb).numpy())

    check()


@given(st.integers(-50, 50), st.integers(-7, 7).filter(bool))
@settings(max_examples=example_count(25), deadline=None)
def test_python_scalars_on_either_side_match_torch(value: int, scalar: int) -> None:
    x = ops.asarray(np.array([value, -value, value + 1], np.int32))
    t = torch.tensor([value, -value, value + 1], dtype=torch.int32)
    np.testing.assert_array_equal((x // scalar).numpy(), (t // scalar).numpy())
    np.testing.assert_array_equal((x % scalar).numpy(), (t % scalar).numpy())
    if value != 0 and value != -1:  # a zero in the divisor tensor raises (below)
        np.testing.assert_array_equal((scalar // x).numpy(), (scalar // t).numpy())
        np.testing.assert_array_equal((scalar % x).numpy(), (scalar % t).numpy())
    f, tf = x.float(), t.float()
    np.testing.assert_array_equal((f // (scalar / 2)).numpy(), (tf // (scalar / 2)).numpy())
    np.testing.assert_array_equal((f % (scalar / 2)).numpy(), (tf % (scalar / 2)).numpy())


def test_integer_division_by_zero_raises_as_torch_does() -> None:
    a, b = np.array([5, -3], np.int32), np.array([2, 0], np.int32)
    for op in (lambda p, q: p // q, lambda p, q: p % q):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            op(torch.from_numpy(a), torch.from_numpy(b))
        with pytest.raises(ZeroDivisionError, match="integer division by zero"):
            op(ops.asarray(a), ops.asarray(b))


def test_float_division_by_zero_matches_torch() -> None:
    a = np.array([-3.0, 0.0, 2.5, -0.0], np.float32)
    zero = np.zeros(4, np.float32)
    np.testing.assert_array_equal((ops.asarray(a) // ops.asarray(zero)).numpy(),
                                  (torch.from_numpy(a) // torch.from_numpy(zero)).numpy())
    np.testing.assert_array_equal((ops.asarray(a) % ops.asarray(zero)).numpy(),
                                  (torch.from_numpy(a) % torch.from_numpy(zero)).numpy())


def test_floor_divide_records_into_graphs() -> None:
    xs = ops.symbol([4], dtype="int32")
    graph = ops.trace_from((xs // 3) + (xs % -3), inputs=[xs])
    x = np.array([-7, -1, 0, 8], np.int32)
    expected = torch.from_numpy(x) // 3 + torch.from_numpy(x) % -3
    np.testing.assert_array_equal(graph.build(target="cpu")(x).numpy(), expected.numpy())


def _tensor_kinds(values: np.ndarray) -> list[object]:
    """The same data as each kind of tensor users get back: an operator's result, a 'cpu' array, a 'cuda' one."""
    return [ops.asarray(values).reshape(values.shape), hidet.asarray(values), hidet.asarray(values, device="cuda")]


@given(arrays(dtype="float32", shape=st.tuples(st.integers(1, 3), st.integers(1, 4))))
@settings(max_examples=example_count(10), deadline=None)
def test_dtype_conversions_match_torch(values: np.ndarray) -> None:
    t = torch.from_numpy(values)
    for x in _tensor_kinds(values):
        for ours, theirs in [(x.float(), t.float()), (x.half(), t.half()), (x.double(), t.double()),
                             (x.to(torch.int32), t.to(torch.int32)), (x.to(dtype="float16"), t.to(dtype=torch.float16)),
                             (x.to("cpu", torch.float64), t.to("cpu", torch.float64))]:
            assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
            np.testing.assert_array_equal(np.asarray(ours.numpy()), theirs.numpy())
        np.testing.assert_array_equal(x.bfloat16().numpy().astype(np.float32), t.bfloat16().float().numpy())
        assert x.tolist() == t.tolist()


@given(st.one_of(st.integers(-100, 100), st.floats(-1e3, 1e3, width=32), st.booleans()))
@settings(max_examples=example_count(15), deadline=None)
def test_item_matches_torch(value: object) -> None:
    t = torch.tensor([value])
    for x in _tensor_kinds(t.numpy()):
        assert x.item() == t.item() and type(x.item()) is type(t.item())
        assert x.reshape([1, 1]).item() == t.item()


def test_item_of_several_elements_is_refused() -> None:
    with pytest.raises(ValueError, match="3 elements"):
        (ops.asarray(np.ones(3, np.float32)) + 1).item()
    with pytest.raises(ValueError, match="3 elements"):
        hidet.asarray(np.ones(3), device="cuda").item()


def test_device_moves_copy_and_keep_the_kind() -> None:
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = ops.asarray(values) * 2
    on_cuda = result.cuda()
    assert on_cuda.device == "cuda" and isinstance(on_cuda, ops.Tensor)
    assert result.cpu() is result and result.to("cpu") is result and result.to(dtype="float32") is result
    assert on_cuda.cuda() is on_cuda and on_cuda.to(device="cuda:0") is on_cuda
    back = on_cuda.to(device="cpu", dtype="float16")
    assert back.device == "cpu" and back.dtype == "float16"
    np.testing.assert_array_equal(back.numpy(), (values * 2).astype(np.float16))
    copied = result.to(copy=True)
    assert copied is not result and copied.storage is not result.storage
    np.testing.assert_array_equal((on_cuda + 1).cpu().numpy(), values * 2 + 1)  # operators run on the emulator
    assert result.to(torch.device("cuda")).device == "cuda"
    assert result.to(on_cuda).device == "cuda"  # another tensor's device and dtype

    array = hidet.asarray(values)
    assert isinstance(array.cuda(), DeviceArray) and isinstance(array.cuda().cpu(), HostArray)
    assert array.to("cpu") is array and isinstance(array.half(), HostArray)
    moved = array.cuda().to("cpu", "int64")
    assert isinstance(moved, HostArray) and moved.dtype == np.int64


def test_bad_devices_and_dtypes_are_refused() -> None:
    x = ops.asarray(np.ones(2, np.float32)) + 1
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda'"):
        x.to("cuda:1")
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda'"):
        hidet.asarray(np.ones(2)).to(device="tpu")
    with pytest.raises(TypeError, match="not a data type"):
        x.to(dtype="complex_of_nothing")
    with pytest.raises(TypeError, match="at most 2 positional"):
        x.to("cpu", "float32", "extra")
    with pytest.raises(ValueError, match="symbolic tensor"):
        ops.symbol([2]).cuda()
    assert ops.symbol([2], dtype="int32").float().dtype == "float32"  # a cast records into the graph
    with pytest.raises(TypeError, match="bool"):
        ops.asarray(np.ones(2, bool)) // ops.asarray(np.ones(2, bool))
