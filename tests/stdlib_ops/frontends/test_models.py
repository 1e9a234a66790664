"""The three models of `examples/torch_models.py` (an MLP, ResNet-18, a BERT encoder stack), random weights, through
both paths in (`torch.compile(backend="hidet_lang")` and ONNX exported by `torch.onnx.export`), on the CPU and on
CUDA (a GPU, or the CUDA emulator), against torch eager; batch sizes 1 and 4 through one compiled graph. On CUDA,
ResNet-18 and BERT go through ONNX only: both paths reach the same graph of the same operators, whose CUDA kernels
the emulator runs slowly; the MLP takes both there (the torch backend's own CUDA path)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the model tests need torch (the `frontends` extra)")
onnx = pytest.importorskip("onnx", reason="the model tests need onnx (the `frontends` extra)")
pytest.importorskip("onnxscript", reason="torch.onnx.export needs onnxscript (the `frontends` extra)")
pytest.importorskip("transformers", reason="the BERT model test needs transformers (the `frontends` extra)")

import stdlib_ops as ops  # noqa: E402
from examples.torch_models import MODELS, onnx_bytes, outputs_of  # noqa: E402

SMALL = {"mlp": {}, "resnet18": {"size": 64}, "bert": {"sequence": 32}}
"""Each model's builder arguments here: small inputs keep the emulator's runs short."""


def batched(name: str, batch: int) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Model `name` (the same weights every time) with inputs of batch size `batch`."""
    return MODELS[name](batch=batch, **SMALL[name])


@functools.cache
def eager_outputs(name: str, batch: int) -> list[np.ndarray]:
    """The model's outputs in torch eager mode."""
    model, inputs = batched(name, batch)
    with torch.no_grad():
        return [t.numpy() for t in outputs_of(model(*inputs))]


def assert_close_to_eager(name: str, got: list[np.ndarray], want: list[np.ndarray]) -> None:
    """Outputs within f32 rounding of torch's: both compute the same sums in different orders (and ours with batch
    norms folded into the weights), so they differ by the rounding of sums of up to 4608 products per layer, which
    stays below 1e-4 of each output's scale (the largest magnitude of that output) in these models."""
    assert len(got) == len(want), f"{name}: {len(got)} outputs, torch gives {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{name} output {k}: shape {g.shape}, torch {w.shape}"
        scale = float(np.abs(w).max())
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-4 * scale, err_msg=f"{name} output {k}")


@pytest.mark.parametrize(("name", "target"), [(name, target) for name in sorted(MODELS)
                                               for target in ("cpu", "cuda") if target == "cpu" or name == "mlp"])
def test_torch_compile_matches_eager_at_two_batch_sizes(name: str, target: str) -> None:
    torch._dynamo.reset()
    compiled_graphs = []
    from stdlib_ops.frontends.torch_backend import hidet_lang_backend

    def counting_backend(gm: torch.fx.GraphModule, example_inputs: list, **options: object) -> object:
        compiled_graphs.append(gm)
        return hidet_lang_backend(gm, example_inputs, **options)

    model, _ = batched(name, 4)
    compiled = torch.compile(model, backend=counting_backend, options={"target": target})
    # the batch dimension is dynamic, and size-oblivious so that Dynamo does not specialize the batch of 1
    with torch.fx.experimental._config.patch(backed_size_oblivious=True), torch.no_grad():
        for batch in (4, 1):
            _, inputs = batched(name, batch)
            for t in inputs:
                torch._dynamo.mark_dynamic(t, 0)
            got = [t.cpu().numpy() for t in outputs_of(compiled(*inputs))]
            assert_close_to_eager(name, got, eager_outputs(name, batch))
    assert len(compiled_graphs) == 1, f"{name} was compiled {len(compiled_graphs)} times for two batch sizes"


@functools.cache
def onnx_graph(name: str) -> ops.FlowGraph:
    """Model `name` exported to ONNX with a symbolic batch dimension, imported and optimized."""
    model, inputs = batched(name, 4)
    return ops.optimize(ops.from_onnx(onnx.load_from_string(onnx_bytes(model, inputs))))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_onnx_import_matches_eager_at_two_batch_sizes(name: str, target: str) -> None:
    graph = onnx_graph(name)
    assert any(isinstance(d, str) for d in graph.inputs[0].shape), "the batch dimension is symbolic"
    compiled = graph.build(target)
    for batch in (4, 1):
        _, inputs = batched(name, batch)
        result = compiled(*[t.numpy() for t in inputs])
        got = [t.numpy() for t in (result if isinstance(result, tuple) else (result,))]
        assert_close_to_eager(name, got, eager_outputs(name, batch))


def test_resnet_batch_norms_fold_into_the_convolutions() -> None:
    graph = onnx_graph("resnet18")
    names = [op.name for op in graph.nodes]
    assert names.count("conv2d") == 20
    assert "sub" not in names and "batch_norm" not in names
