"""`from_onnx` as a whole: models exported by torch (both exporters) against torch, symbolic dimensions served by
one compiled graph, the one error listing every unsupported operator, the refusals (old opsets, unsupported
attribute values) naming the node, paths and external data, shape inference where value_info is missing."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnx_cases import make_model, run_both  # noqa: E402

import stdlib_ops as ops  # noqa: E402
from hidet_lang.testing import example_count  # noqa: E402
from stdlib_ops.frontends import UnsupportedOperationsError  # noqa: E402
from stdlib_ops.frontends.onnx_ops import ConversionError  # noqa: E402


def node(op_type: str, inputs: list[str], outputs: list[str], name: str = "", **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op_type, inputs, outputs, name=name, **attrs)


# ---- models exported by torch ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dynamo", [True, False])
def test_an_exported_mlp_matches_torch_at_two_batch_sizes(dynamo: bool, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if dynamo:
        pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 33), torch.nn.GELU(), torch.nn.Linear(33, 33), torch.nn.Tanh(),
                                torch.nn.Linear(33, 5), torch.nn.Softmax(dim=-1)).eval()
    path = tmp_path / "mlp.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            torch.onnx.export(model, (torch.randn(4, 16),), path, dynamo=True, input_names=["x"],
                              dynamic_shapes=({0: torch.export.Dim("batch")},))
        else:
            torch.onnx.export(model, (torch.randn(4, 16),), path, dynamo=False, input_names=["x"], opset_version=17,
                              dynamic_axes={"x": {0: "batch"}})
    graph = ops.from_onnx(path)
    assert graph.input_names == ["x"] and graph.inputs[0].shape == ("batch", 16)
    compiled = ops.optimize(graph).build("cpu")
    for batch in (3, 8):
        x = torch.randn(batch, 16)
        with torch.no_grad():
            want = model(x).numpy()
        # three layers of at most 33 float32 products each, softmax at the end: the probabilities agree with
        # torch's (other summation orders) within a few ulp of the sums, scaled by the layers' gains
        np.testing.assert_allclose(compiled(x.numpy()).numpy(), want, rtol=1e-5, atol=1e-6)


# ---- symbolic dimensions ---------------------------------------------------------------------------------------


def _dynamic_reshape_model() -> onnx.ModelProto:
    """y = (x viewed as [batch, 2, 3], transposed, flattened back to [batch, 6], plus a ConstantOfShape of the
    input's shape and an Expand of a constant row), with the reshape targets computed from Shape."""
    nodes = [
        node("Shape", ["x"], ["shape"]),
        node("Gather", ["shape", "zero"], ["batch"], axis=0),
        node("Unsqueeze", ["batch", "axis0"], ["batch1"]),
        node("Concat", ["batch1", "split_dims"], ["dims3"], axis=0),
        node("Reshape", ["x", "dims3"], ["x3"]),
        node("Transpose", ["x3"], ["t3"], perm=[0, 2, 1]),
        node("Reshape", ["t3", "flat_dims"], ["flat"]),
        node("ConstantOfShape", ["shape"], ["ones"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
        node("Expand", ["row", "shape"], ["rows"]),
        node("Add", ["flat", "ones"], ["plus_one"]),
        node("Mul", ["plus_one", "rows"], ["y"]),
    ]
    inits = {"zero": np.array(0, np.int64), "axis0": np.array([0], np.int64),
             "split_dims": np.array([2, 3], np.int64), "flat_dims": np.array([0, -1], np.int64),
             "row": np.arange(6, dtype=np.float32).reshape(1, 6)}
    return make_model(nodes, {"x": np.zeros((2, 6), np.float32)}, initializers=inits, shapes={"x": ["batch", 6]})


@settings(max_examples=example_count(3), deadline=None)
@given(batches=st.lists(st.integers(1, 9), min_size=2, max_size=2, unique=True))
def test_one_compiled_graph_serves_every_batch_size(batches: list[int]) -> None:
    model = _dynamic_reshape_model()
    graph = ops.from_onnx(model)
    assert graph.inputs[0].shape == ("batch", 6) and graph.outputs[0].shape == ("batch", 6)
    compiled = ops.optimize(graph).build("cpu")
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in batches:
        x = np.random.default_rng(batch).standard_normal((batch, 6)).astype(np.float32)
        # data movement, one addition and one multiplication per element: exact
        np.testing.assert_array_equal(compiled(x).numpy(), session.run(None, {"x": x})[0])


def test_unnamed_dimensions_get_names_and_input_shapes_override_them() -> None:
    model = make_model([node("Relu", ["x"], ["y"])], {"x": np.zeros((2, 3), np.float32)}, shapes={"x": [None, 3]})
    assert ops.from_onnx(model).inputs[0].shape == ("x_0", 3)
    assert ops.from_onnx(model, input_shapes={"x": [4, 3]}).inputs[0].shape == (4, 3)
    with pytest.raises(ValueError, match=r"input_shapes names \['z'\], which are not inputs of the model"):
        ops.from_onnx(model, input_shapes={"z": [1]})


def test_dimension_names_that_are_not_identifiers_are_made_into_identifiers() -> None:
    inputs = {"input.1": np.zeros((2, 3), np.float32)}
    model = make_model([node("Relu", ["input.1"], ["y"])], inputs, shapes={"input.1": ["batch size", None]})
    graph = ops.from_onnx(model)
    assert graph.inputs[0].shape == ("batch_size", "input_1_1") and graph.input_names == ["input.1"]
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_array_equal(ops.optimize(graph).build("cpu")(x).numpy(), np.maximum(x, 0))


# ---- what is refused, and how ----------------------------------------------------------------------------------


def test_every_unsupported_operator_is_listed_once_with_its_nodes() -> None:
    nodes = [
        node("TopK", ["x", "k"], ["v1", "i1"], name="first_topk"),
        node("Relu", ["x"], ["r"], name="relu"),
        node("NonZero", ["r"], ["nz"], name="where_nonzero"),
        node("TopK", ["r", "k"], ["v2", "i2"], name="second_topk"),
        node("FusedThing", ["r"], ["y"], name="custom", domain="com.example"),
    ]
    graph = helper.make_graph(nodes, "test", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                              [helper.make_empty_tensor_value_info(name) for name in ("v1", "v2", "nz", "y")],
                              initializer=[onnx.numpy_helper.from_array(np.array([2], np.int64), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.example", 1)])
    with pytest.raises(UnsupportedOperationsError) as info:
        ops.from_onnx(model)
    assert info.value.missing == {"TopK": ["first_topk", "second_topk"], "NonZero": ["where_nonzero"],
                                  "com.example::FusedThing": ["custom"]}
    message = str(info.value)
    assert message.startswith("ONNX model 'test': 3 unsupported operations:")
    assert "TopK x2 (at first_topk, second_topk)" in message and "NonZero x1 (at where_nonzero)" in message


def test_an_opset_12_model_is_refused_with_the_way_to_convert_it() -> None:
    model = make_model([node("Relu", ["x"], ["y"])], {"x": np.zeros(3, np.float32)}, opset=12)
    with pytest.raises(ValueError, match=r"uses opset 12; from_onnx needs opset 13 or later .*"
                                         r"onnx\.version_converter\.convert_version\(model, 13\)"):
        ops.from_onnx(model)


@pytest.mark.parametrize(("op", "attrs", "extra_inputs", "message"), [
    ("Pad", {"mode": "reflect"}, {"p": np.ones(8, np.int64)}, "mode='reflect' is not supported"),
    ("ArgMax", {"select_last_index": 1}, {}, "select_last_index=1 is not supported"),
    ("AveragePool", {"kernel_shape": [2, 2], "ceil_mode": 1, "strides": [2, 2]}, {},
     "ceil_mode=1 is not supported for AveragePool"),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 0, 0, 1]}, {}, "not supported with count_include_pad=0"),
    ("Gelu", {"approximate": "fast"}, {}, "approximate='fast' is not supported"),
])
def test_unsupported_attribute_values_name_the_node(op: str, attrs: dict, extra_inputs: dict, message: str) -> None:
    model = make_model([node(op, ["x", *extra_inputs], ["y"], name="the_node", **attrs)],
                       {"x": np.zeros((1, 2, 5, 5), np.float32)}, initializers=extra_inputs,
                       opset=20 if op == "Gelu" else 18)
    with pytest.raises(ConversionError, match=rf"ONNX node 'the_node' \({op}\): .*{message}"):
        ops.from_onnx(model)


def test_an_operator_refusing_its_operands_names_the_node() -> None:
    model = make_model([node("MatMul", ["a", "b"], ["y"], name="mm")], {"a": np.zeros((2, 3), np.float32),
                                                                          "b": np.zeros((3, 4), np.float32)})
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 5  # now [5, 4]: does not match a's 3 columns
    with pytest.raises(ConversionError, match=r"ONNX node 'mm' \(MatMul\): matmul: Input operand 1 has a mismatch"):
        ops.from_onnx(model)


def test_a_symbolic_range_is_refused_clearly() -> None:
    nodes = [node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["n"], axis=0),
             node("Range", ["zero", "n", "one"], ["y"], name="iota")]
    model = make_model(nodes, {"x": np.zeros((3,), np.float32)}, shapes={"x": ["n"]},
                       initializers={"zero": np.array(0, np.int64), "one": np.array(1, np.int64)})
    with pytest.raises(ConversionError, match=r"'iota' \(Range\): a range with the symbolic bounds \[0, 'n', 1\]"):
        ops.from_onnx(model)


# ---- paths, external data, shape inference ---------------------------------------------------------------------


def _small_model() -> onnx.ModelProto:
    w = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    return make_model([node("MatMul", ["x", "w"], ["h"]), node("Relu", ["h"], ["y"])],
                      {"x": np.zeros((2, 64), np.float32)}, initializers={"w": w})


def test_a_path_with_external_data_and_a_model_proto_give_the_same_graph(tmp_path: Path) -> None:
    model = _small_model()
    path = tmp_path / "model.onnx"
    saved = onnx.ModelProto()
    saved.CopyFrom(model)  # saving with external data rewrites the initializers of the model saved
    onnx.save_model(saved, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
                    size_threshold=0)
    assert (tmp_path / "w.bin").exists()
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    results = [ops.optimize(ops.from_onnx(m)).build("cpu")(x).numpy() for m in (model, path, str(path))]
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])
    got, want = run_both(model, {"x": x})
    # 64 products per sum, values below 4 * 4: as the MatMul test of test_onnx_ops
    np.testing.assert_allclose(got[0], want[0], atol=64 * 16 * 2.0**-23)


def test_shape_inference_runs_only_where_value_info_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _small_model()  # make_model ran shape inference: the value_info holds 'h'
    assert "h" in [v.name for v in model.graph.value_info]
    calls = []
    infer = onnx.shape_inference.infer_shapes
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda m, *a, **k: calls.append(1) or infer(m, *a, **k))
    ops.from_onnx(model)
    assert calls == []
    del model.graph.value_info[:]
    ops.from_onnx(model)
    assert calls == [1]


def test_a_converted_value_that_contradicts_the_declared_type_is_refused() -> None:
    model = _small_model()
    model.graph.value_info[0].type.tensor_type.shape.dim[1].dim_value = 31  # 'h' is [2, 32]
    with pytest.raises(ConversionError, match=r"the converted output 'h' has shape \[2, 32\], the model declares "
                                              r"\[2, 31\]"):
        ops.from_onnx(model)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="expected an onnx.ModelProto or a path, got int"):
        ops.from_onnx(3)
