"""Each entry of the ONNX operator table against onnxruntime: a one-node (or tiny) model built with
`onnx.helper` for drawn shapes and attributes, through `from_onnx` -> optimize -> build('cpu'), on the same
random inputs. Shapes are few (each new one compiles a kernel); the data is drawn afresh for every example."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnx_cases import F32_EPS, check, floats  # noqa: E402

from hidet_lang.testing import example_count
from stdlib_ops.frontends.onnx_ops import CONVERTERS  # noqa: E402

SETTINGS = settings(max_examples=example_count(3), deadline=None)
FEW = settings(max_examples=example_count(5), deadline=None)
# both sides evaluate the same float32 formula with libm-class functions, each within about 2 ulp of the exact
# value: they differ by at most 4 ulp, plus a few ulp of 1 where a result near 0 comes from cancellation
MATH_RTOL, MATH_ATOL = 4 * F32_EPS, 4 * F32_EPS


def rng_of(data: st.DataObject) -> np.random.Generator:
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


def node(op_type: str, inputs: list[str], outputs: tuple[str, ...] = ("y",), **attrs: object) -> object:
    return helper.make_node(op_type, inputs, list(outputs), **attrs)


# ---- element-wise ----------------------------------------------------------------------------------------------

EXACT_UNARY = ["Relu", "Neg", "Abs", "Floor", "Ceil", "Round", "Reciprocal", "IsNaN", "Identity", "Dropout"]
MATH_UNARY = {  # op: the input range (inside the domain)
    "Exp": (-10, 10), "Log": (0.01, 100), "Sqrt": (0, 100), "Sigmoid": (-10, 10), "Tanh": (-5, 5),
    "Erf": (-3, 3), "Sin": (-6, 6), "Cos": (-6, 6),
}


@pytest.mark.parametrize("op_type", EXACT_UNARY)
@SETTINGS
@given(data=st.data())
def test_exact_unary(op_type: str, data: st.DataObject) -> None:
    x = floats(rng_of(data), (5, 7))
    x[0, :3] = [np.nan, 0.5, -2.5]  # NaN for IsNaN, halves for Round's ties-to-even
    if op_type not in ("IsNaN", "Identity", "Dropout"):
        x[0, 0] = 1.0
    # one IEEE operation (or none) per element: bit-exact
    check(node(op_type, ["x"]), {"x": x})


@pytest.mark.parametrize("op_type", sorted(MATH_UNARY))
@SETTINGS
@given(data=st.data())
def test_math_unary(op_type: str, data: st.DataObject) -> None:
    lo, hi = MATH_UNARY[op_type]
    check(node(op_type, ["x"]), {"x": floats(rng_of(data), (5, 7), lo, hi)}, MATH_RTOL, MATH_ATOL)


@pytest.mark.parametrize(("op_type", "attrs"), [
    ("Gelu", {}), ("Gelu", {"approximate": "tanh"}), ("LeakyRelu", {"alpha": 0.1}), ("HardSigmoid", {}),
    ("HardSwish", {}),
])
@SETTINGS
@given(data=st.data())
def test_activations(op_type: str, attrs: dict, data: st.DataObject) -> None:
    # a few float32 operations each (erf / tanh within 2 ulp): within 8 ulp, plus 8 ulp of 1 near zero
    check(node(op_type, ["x"], **attrs), {"x": floats(rng_of(data), (5, 7))}, 2 * MATH_RTOL, 2 * MATH_ATOL,
          opset=20 if op_type == "Gelu" else 18)


@SETTINGS
@given(data=st.data())
def test_prelu_broadcasts_its_slope(data: st.DataObject) -> None:
    rng = rng_of(data)
    slope = floats(rng, (3, 1, 1), 0, 1)
    # one multiplication where x < 0: bit-exact
    check(node("PRelu", ["x", "slope"]), {"x": floats(rng, (2, 3, 4, 5))}, initializers={"slope": slope})


shapes_2 = st.sampled_from([((3, 1, 5), (4, 1)), ((7,), (2, 7)), ((2, 3), (2, 3)), ((1,), (3, 1, 1))])


@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
@SETTINGS
@given(data=st.data(), shapes=shapes_2)
def test_binary_arithmetic(op_type: str, data: st.DataObject, shapes: tuple) -> None:
    rng = rng_of(data)
    a, b = floats(rng, shapes[0]), floats(rng, shapes[1], 0.5, 4)
    # one IEEE operation per element: bit-exact
    check(node(op_type, ["a", "b"]), {"a": a, "b": b})


@SETTINGS
@given(data=st.data())
def test_pow_with_a_float_or_an_integer_exponent(data: st.DataObject) -> None:
    rng = rng_of(data)
    x = floats(rng, (4, 5), 0.1, 3)
    # powf within 2 ulp on each side
    check(node("Pow", ["x", "e"]), {"x": x, "e": floats(rng, (5,), -2, 2)}, MATH_RTOL)
    check(node("Pow", ["x", "e"]), {"x": x}, MATH_RTOL, initializers={"e": np.array(3, np.int64)})


@pytest.mark.parametrize("op_type", ["Sum", "Mean", "Max", "Min"])
@SETTINGS
@given(data=st.data())
def test_variadic(op_type: str, data: st.DataObject) -> None:
    rng = rng_of(data)
    inputs = {"a": floats(rng, (3, 4)), "b": floats(rng, (4,)), "c": floats(rng, (3, 1))}
    # Sum and Mean add left to right as onnxruntime does, then Mean divides once: within 2 ulp of the sum's size
    check(node(op_type, ["a", "b", "c"]), inputs, 2 * F32_EPS, 2 * 12 * F32_EPS)


def test_integer_division_truncates() -> None:
    a = np.array([7, -7, 7, -7, 0, 9], np.int64)
    b = np.array([2, 2, -2, -2, 3, 3], np.int64)
    check(node("Div", ["a", "b"]), {"a": a, "b": b})


@pytest.mark.parametrize("op_type", ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"])
@SETTINGS
@given(data=st.data(), shapes=shapes_2)
def test_comparisons(op_type: str, data: st.DataObject, shapes: tuple) -> None:
    rng = rng_of(data)
    a, b = (np.round(floats(rng, s)) for s in shapes)  # rounded: equal elements occur
    check(node(op_type, ["a", "b"]), {"a": a, "b": b})


@pytest.mark.parametrize("op_type", ["And", "Or", "Xor", "Not"])
@SETTINGS
@given(data=st.data())
def test_logical(op_type: str, data: st.DataObject) -> None:
    rng = rng_of(data)
    a, b = rng.random((3, 4)) < 0.5, rng.random((4,)) < 0.5
    check(node(op_type, ["a"] if op_type == "Not" else ["a", "b"]), {"a": a} if op_type == "Not" else {"a": a, "b": b})


@SETTINGS
@given(data=st.data())
def test_where(data: st.DataObject) -> None:
    rng = rng_of(data)
    check(node("Where", ["c", "a", "b"]), {"c": rng.random((3, 1)) < 0.5, "a": floats(rng, (3, 4)),
                                            "b": floats(rng, (4,))})


@SETTINGS
@given(data=st.data(), lo=st.floats(-2, 0, width=32), hi=st.floats(0, 2, width=32))
def test_clip(data: st.DataObject, lo: float, hi: float) -> None:
    rng = rng_of(data)
    x = floats(rng, (4, 5))
    bounds = {"lo": np.array(lo, np.float32), "hi": np.array(hi, np.float32)}
    check(node("Clip", ["x", "lo", "hi"]), {"x": x}, initializers=bounds)  # known bounds: comparisons, exact
    check(node("Clip", ["x", "", "hi"]), {"x": x}, initializers={"hi": bounds["hi"]})
    check(node("Clip", ["x", "lo", "hi"]), {"x": x, **bounds})  # bounds as graph inputs


@pytest.mark.parametrize(("source", "to"), [
    (np.float32, TensorProto.INT32), (np.float32, TensorProto.INT64), (np.int64, TensorProto.FLOAT),
    (np.float32, TensorProto.BOOL), (np.bool_, TensorProto.FLOAT), (np.float32, TensorProto.FLOAT16),
])
def test_cast(source: type, to: int) -> None:
    x = np.array([[-2.75, -0.5, 0.0, 0.25, 3.5, 7.0]], np.float32).astype(source)
    # float to int truncates toward zero on both sides; float to half rounds to nearest even: exact
    check(node("Cast", ["x"], to=to), {"x": x})


def test_cast_like() -> None:
    x = np.array([1.5, -2.25], np.float32)
    check(node("CastLike", ["x", "t"]), {"x": x}, initializers={"t": np.zeros(1, np.int32)})


# ---- linear algebra and networks -------------------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), m=st.sampled_from([1, 5]), k=st.sampled_from([3, 17]))
def test_matmul(data: st.DataObject, m: int, k: int) -> None:
    rng = rng_of(data)
    # sums of k products in float32, in different orders: within k ulp of the sum of magnitudes (values < 4 * 4)
    check(node("MatMul", ["a", "b"]), {"a": floats(rng, (2, m, k)), "b": floats(rng, (k, 3))}, 0, k * 16 * F32_EPS)


@FEW
@given(data=st.data(), trans_a=st.booleans(), trans_b=st.booleans(), alpha=st.sampled_from([1.0, 0.5]),
       beta=st.sampled_from([1.0, 2.0]), c_shape=st.sampled_from([(4,), (3, 4), (1, 1)]))
def test_gemm(data: st.DataObject, trans_a: bool, trans_b: bool, alpha: float, beta: float, c_shape: tuple) -> None:
    rng = rng_of(data)
    a = floats(rng, (5, 3) if trans_a else (3, 5))
    b = floats(rng, (4, 5) if trans_b else (5, 4))
    attrs = {"transA": int(trans_a), "transB": int(trans_b), "alpha": alpha, "beta": beta}
    # 5 products summed, then scaled and added: within a few ulp of the magnitudes' sum (5 * 16, plus C's 2 * 4)
    check(node("Gemm", ["a", "b", "c"], **attrs), {"a": a}, 0, 8 * 88 * F32_EPS,
          initializers={"b": b, "c": floats(rng, c_shape)})


conv_cases = st.fixed_dictionaries({
    "strides": st.sampled_from([[1, 1], [2, 1], [2, 2]]),
    "pads": st.sampled_from([[0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 1, 2]]),
    "dilations": st.sampled_from([[1, 1], [2, 1]]),
    "group": st.sampled_from([1, 2]),
})


@FEW
@given(data=st.data(), attrs=conv_cases, bias=st.booleans())
def test_conv2d(data: st.DataObject, attrs: dict, bias: bool) -> None:
    rng = rng_of(data)
    x = floats(rng, (2, 4, 7, 6))
    w = floats(rng, (6, 4 // attrs["group"], 3, 2))
    inits = {"w": w, **({"b": floats(rng, (6,))} if bias else {})}
    # sums of (4 / group) * 3 * 2 <= 24 products of values below 4: within 24 ulp of 24 * 16 (plus the bias)
    check(node("Conv", ["x", "w", "b"] if bias else ["x", "w"], **attrs), {"x": x}, 0, 24 * 400 * F32_EPS,
          initializers=inits)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_auto_pad_and_1d(auto_pad: str) -> None:
    rng = np.random.default_rng(0)
    x, w = floats(rng, (1, 2, 9, 8)), floats(rng, (3, 2, 4, 3))
    # 24 products per sum: as test_conv2d
    check(node("Conv", ["x", "w"], auto_pad=auto_pad, strides=[2, 3]), {"x": x}, 0, 24 * 400 * F32_EPS,
          initializers={"w": w})
    x1, w1 = floats(rng, (2, 2, 11)), floats(rng, (3, 2, 3))
    check(node("Conv", ["x", "w"], auto_pad=auto_pad, strides=[2]), {"x": x1}, 0, 6 * 100 * F32_EPS,
          initializers={"w": w1})


pool_cases = st.fixed_dictionaries({
    "kernel_shape": st.sampled_from([[2, 2], [3, 2], [3, 3]]),
    "strides": st.sampled_from([[1, 1], [2, 2], [2, 1]]),
    "pads": st.sampled_from([[0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 0, 1]]),
    "ceil_mode": st.sampled_from([0, 1]),
})


@FEW
@given(data=st.data(), attrs=pool_cases)
def test_max_pool(data: st.DataObject, attrs: dict) -> None:
    # the largest element of each window: exact. Opset 22: before it, the spec (and so shape inference) lets a
    # ceil-mode window start in the end padding, which onnxruntime (as torch) does not
    check(node("MaxPool", ["x"], **attrs), {"x": floats(rng_of(data), (2, 3, 7, 8))}, opset=22)


@FEW
@given(data=st.data(), attrs=pool_cases, include_pad=st.sampled_from([0, 1]))
def test_average_pool(data: st.DataObject, attrs: dict, include_pad: int) -> None:
    attrs = {**attrs, "ceil_mode": 0, "count_include_pad": include_pad}
    if not include_pad and attrs["pads"] == [1, 0, 0, 1]:
        attrs["pads"] = [1, 1, 1, 1]  # asymmetric padding left out of the divisor is refused (test_onnx_import)
    # a sum of at most 9 values below 4, then one division: within 9 ulp of 36
    check(node("AveragePool", ["x"], **attrs), {"x": floats(rng_of(data), (2, 3, 7, 8))}, 0, 9 * 36 * F32_EPS)


@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool(op_type: str) -> None:
    x = floats(np.random.default_rng(1), (2, 3, 5, 7))
    # a mean of 35 values below 4: within 35 ulp of 140
    check(node(op_type, ["x"]), {"x": x}, 0, 35 * 140 * F32_EPS)


@SETTINGS
@given(data=st.data())
def test_batch_norm(data: st.DataObject) -> None:
    rng = rng_of(data)
    c = 3
    params = {"scale": floats(rng, (c,)), "b": floats(rng, (c,)), "mean": floats(rng, (c,)),
              "var": floats(rng, (c,), 0.5, 2)}
    # (x - mean) * (rsqrt(var + eps) * scale) + b against onnxruntime's own order: a few ulp of |x - mean| * |scale|
    # * sqrt(2) (below 8 * 4 * 1.5)
    check(node("BatchNormalization", ["x", "scale", "b", "mean", "var"], epsilon=1e-3),
          {"x": floats(rng, (2, c, 4, 5))}, 0, 8 * 48 * F32_EPS, initializers=params)


@SETTINGS
@given(data=st.data())
def test_instance_norm(data: st.DataObject) -> None:
    rng = rng_of(data)
    params = {"scale": floats(rng, (3,)), "b": floats(rng, (3,))}
    # a mean and a variance over 20 values (20 ulp each), then a normalized value times a scale below 4
    check(node("InstanceNormalization", ["x", "scale", "b"], epsilon=1e-5), {"x": floats(rng, (2, 3, 4, 5))},
          0, 20 * 16 * F32_EPS, initializers=params)


@SETTINGS
@given(data=st.data(), axis=st.sampled_from([-1, -2, 1]))
def test_layer_norm(data: st.DataObject, axis: int) -> None:
    rng = rng_of(data)
    x = floats(rng, (2, 3, 6))
    shape = x.shape[axis:]
    params = {"scale": floats(rng, shape), "b": floats(rng, shape[-1:])}  # the bias broadcast to the axes
    # mean and variance over at most 18 values, a normalized value times a scale below 4: as test_instance_norm
    check(node("LayerNormalization", ["x", "scale", "b"], axis=axis, epsilon=1e-5), {"x": x}, 0, 18 * 16 * F32_EPS,
          initializers=params)


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@SETTINGS
@given(data=st.data(), axis=st.sampled_from([-1, 0, 1]))
def test_softmax(op_type: str, data: st.DataObject, axis: int) -> None:
    # exp of each shifted element, a sum of at most 7 terms, a division or a log: within 8 ulp of each result,
    # plus 8 ulp of the log of the sum (at most log(7) * 8) for LogSoftmax's subtraction
    check(node(op_type, ["x"], axis=axis), {"x": floats(rng_of(data), (3, 7, 5))}, 8 * F32_EPS, 16 * F32_EPS)


# ---- reductions ------------------------------------------------------------------------------------------------

REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


@pytest.mark.parametrize("op_type", REDUCTIONS)
@SETTINGS
@given(data=st.data(), axes=st.sampled_from([[1], [0, 2], [-1], []]), keepdims=st.sampled_from([0, 1]),
       opset=st.sampled_from([13, 18]))
def test_reductions(op_type: str, data: st.DataObject, axes: list, keepdims: int, opset: int) -> None:
    x = floats(rng_of(data), (3, 4, 5), 0.5, 1.5)  # positive: logs of sums are defined, products stay moderate
    as_input = opset >= 18 or op_type == "ReduceSum"
    inits = {"axes": np.array(axes, np.int64)} if as_input and axes else {}
    inputs = ["x", "axes"] if inits else ["x"]
    attrs = {"keepdims": keepdims, **({"axes": axes} if axes and not as_input else {})}
    # at most 60 terms accumulated in float32 in different orders: within 60 ulp of the result (of magnitude at
    # most 60 * 1.5^2, or 1.5^60 ~ 3e10 for a product: relative)
    check(node(op_type, inputs, **attrs), {"x": x}, 64 * F32_EPS, 64 * 135 * F32_EPS, initializers=inits,
          opset=opset)


def test_reduction_noop_with_empty_axes() -> None:
    x = floats(np.random.default_rng(2), (3, 4))
    check(node("ReduceSum", ["x"], noop_with_empty_axes=1), {"x": x})  # the input itself


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
@SETTINGS
@given(data=st.data(), axis=st.sampled_from([0, -1]), keepdims=st.sampled_from([0, 1]))
def test_arg_reductions(op_type: str, data: st.DataObject, axis: int, keepdims: int) -> None:
    x = np.round(floats(rng_of(data), (4, 6)))  # ties occur: the first index wins on both sides
    check(node(op_type, ["x"], axis=axis, keepdims=keepdims), {"x": x})


# ---- shapes and data movement (all exact) ----------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), target=st.sampled_from([[0, -1], [2, 0, 2, 2], [-1], [4, 5, 0], [20, 2]]))
def test_reshape(data: st.DataObject, target: list) -> None:
    x = floats(rng_of(data), (4, 5, 2))
    allowzero = int(0 not in target)  # allowzero matters only for a 0 in the target
    check(node("Reshape", ["x", "s"], allowzero=allowzero), {"x": x}, initializers={"s": np.array(target, np.int64)})


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1])
def test_flatten(axis: int) -> None:
    check(node("Flatten", ["x"], axis=axis), {"x": floats(np.random.default_rng(3), (2, 3, 4))})


@SETTINGS
@given(data=st.data(), perm=st.permutations([0, 1, 2]))
def test_transpose(data: st.DataObject, perm: list) -> None:
    check(node("Transpose", ["x"], perm=list(perm)), {"x": floats(rng_of(data), (3, 4, 5))})


@pytest.mark.parametrize("axes", [[2], [0, 3], [-1], None])
def test_squeeze_and_unsqueeze(axes: list | None) -> None:
    x = floats(np.random.default_rng(4), (1, 3, 1, 1))
    inits = {"axes": np.array(axes, np.int64)} if axes else {}
    check(node("Squeeze", ["x", "axes"] if axes else ["x"]), {"x": x}, initializers=inits)
    if axes:
        check(node("Unsqueeze", ["x", "axes"]), {"x": floats(np.random.default_rng(5), (3, 2))},
              initializers={"axes": np.array([0, -1], np.int64) if axes == [0, 3] else np.array(axes, np.int64)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis: int) -> None:
    rng = np.random.default_rng(6)
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for k, s in enumerate(shapes):
        s[axis] += k
    inputs = {f"x{k}": floats(rng, s) for k, s in enumerate(shapes)}
    check(node("Concat", list(inputs), axis=axis), inputs)


@pytest.mark.parametrize(("sizes", "attrs"), [([2, 5], {}), (None, {}), (None, {"num_outputs": 2})])
def test_split(sizes: list | None, attrs: dict) -> None:
    x = floats(np.random.default_rng(7), (3, 7) if sizes or attrs else (3, 8))
    outputs = ("y0", "y1")
    inits = {"s": np.array(sizes, np.int64)} if sizes else {}
    # opset 18 needs the sizes or num_outputs; opset 13 splits into equal parts without either
    check(node("Split", ["x", "s"] if sizes else ["x"], outputs, axis=1, **attrs), {"x": x}, outputs=outputs,
          initializers=inits, opset=18 if sizes or attrs else 13)


slices = st.tuples(st.integers(-9, 9), st.integers(-9, 9), st.sampled_from([1, 2, -1, -2]))


@FEW
@given(data=st.data(), first=slices, second=slices)
def test_slice(data: st.DataObject, first: tuple, second: tuple) -> None:
    x = floats(rng_of(data), (6, 7))
    starts, ends, steps = zip(first, second)
    if any(len(range(*np.s_[s:e:t].indices(n))) == 0 for s, e, t, n in zip(starts, ends, steps, x.shape)):
        ends = (2**63 - 1, -(2**63)) if steps[0] > 0 else (-(2**63), -(2**63))  # ONNX's 'to the end'
        starts, steps = (0, -1), (1, -1) if steps[0] > 0 else (-1, -1)
    inits = {"starts": np.array(starts, np.int64), "ends": np.array(ends, np.int64),
             "axes": np.array([0, -1], np.int64), "steps": np.array(steps, np.int64)}
    check(node("Slice", ["x", "starts", "ends", "axes", "steps"]), {"x": x}, initializers=inits)


@SETTINGS
@given(data=st.data(), axis=st.sampled_from([0, 1, -1]))
def test_gather(data: st.DataObject, axis: int) -> None:
    rng = rng_of(data)
    x = floats(rng, (5, 6, 4))
    n = x.shape[axis]
    check(node("Gather", ["x", "i"], axis=axis), {"x": x, "i": rng.integers(-n, n, (2, 3)).astype(np.int64)})


@SETTINGS
@given(data=st.data(), axis=st.sampled_from([0, 1]))
def test_gather_elements(data: st.DataObject, axis: int) -> None:
    rng = rng_of(data)
    x = floats(rng, (4, 5))
    shape = (3, 5) if axis == 0 else (4, 2)
    idx = rng.integers(-x.shape[axis], x.shape[axis], shape).astype(np.int64)
    check(node("GatherElements", ["x", "i"], axis=axis), {"x": x, "i": idx})


@pytest.mark.parametrize(("shape", "target"), [((3, 1), [2, 3, 4]), ((4,), [3, 1]), ((2, 1, 5), [1, 1])])
def test_expand(shape: tuple, target: list) -> None:
    check(node("Expand", ["x", "s"]), {"x": floats(np.random.default_rng(8), shape)},
          initializers={"s": np.array(target, np.int64)})


def test_tile_and_pad() -> None:
    rng = np.random.default_rng(9)
    x = floats(rng, (2, 3))
    check(node("Tile", ["x", "r"]), {"x": x}, initializers={"r": np.array([2, 3], np.int64)})
    pads = {"p": np.array([1, 0, 2, 3], np.int64), "v": np.array(1.5, np.float32)}
    check(node("Pad", ["x", "p", "v"]), {"x": x}, initializers=pads)
    check(node("Pad", ["x", "p", "", "a"]), {"x": x},
          initializers={"p": np.array([2, 1], np.int64), "a": np.array([-1], np.int64)})


def test_shape_computations_fold_while_importing() -> None:
    """Shape, Gather, Unsqueeze, Concat, Mul, Cast, ConstantOfShape, Range, Size and Constant on shapes."""
    x = floats(np.random.default_rng(10), (2, 3, 4))
    nodes = [
        node("Shape", ["x"], ("shape",)),
        node("Shape", ["x"], ("tail",), start=1),
        node("Constant", [], ("one",), value=helper.make_tensor("one", TensorProto.INT64, [], [1])),
        node("Gather", ["shape", "one"], ("d1",), axis=0),
        node("Unsqueeze", ["d1", "zero"], ("d1v",)),
        node("Mul", ["tail", "two"], ("doubled",)),
        node("Concat", ["d1v", "doubled"], ("dims",), axis=0),
        node("ConstantOfShape", ["dims"], ("y",), value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.5])),
        node("Cast", ["d1"], ("limit",), to=TensorProto.INT64),
        node("Range", ["zero_s", "limit", "one"], ("r",)),
        node("Size", ["x"], ("n",)),
    ]
    inits = {"zero": np.array([0], np.int64), "two": np.array(2, np.int64), "zero_s": np.array(0, np.int64)}
    check(nodes, {"x": x}, outputs=("y", "r", "n", "shape"), initializers=inits)


def test_every_table_entry_is_tested_here() -> None:
    source = open(__file__).read()
    untested = [op for op in CONVERTERS if f'"{op}"' not in source]
    assert not untested, untested
