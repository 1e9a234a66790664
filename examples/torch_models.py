"""Three PyTorch models taken to compiled graphs, through `torch.compile(model, backend="hidet_lang")` and through
ONNX (`torch.onnx.export`, then `stdlib_ops.from_onnx`), each checked against torch: an MLP, ResNet-18 (the
torchvision architecture, written out here: torchvision has no build for this torch), and a BERT encoder stack
(`transformers.BertModel` from a small `BertConfig`). Weights are random; nothing is downloaded.

    python examples/torch_models.py            # small inputs, on the CPU
    python examples/torch_models.py --target cuda   # CUDA: a GPU, or the CUDA emulator without one

The model builders are shared with the model tests and `examples/benchmarks/models.py`.
"""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable

import torch
from torch import nn

Inputs = tuple[torch.Tensor, ...]


def mlp(batch: int = 4, features: int = 64) -> tuple[nn.Module, Inputs]:
    """A three-layer MLP with GELU and layer norm, and an input batch."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(features, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    return model.eval(), (torch.randn(batch, features),)


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convolutions with batch norms and the residual connection (a 1x1 convolution and batch norm
    on the shortcut when the block changes the shape)."""

    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inputs != outputs:
            self.downsample = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))."""
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """ResNet-18 as torchvision defines it: a 7x7 stem and max pool, four stages of two basic blocks (64, 128, 256,
    512 channels), global average pooling and a fully connected classifier."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, inputs = [], 64
        for outputs, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages.append(nn.Sequential(BasicBlock(inputs, outputs, stride), BasicBlock(outputs, outputs, 1)))
            inputs = outputs
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class scores for a batch of images [N, 3, H, W]."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(batch: int = 1, size: int = 64) -> tuple[nn.Module, Inputs]:
    """ResNet-18 with random weights and batch-norm statistics (so that folding them is exercised), and images."""
    torch.manual_seed(0)
    model = ResNet18()
    generator = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            channels = module.num_features
            module.running_mean.copy_(0.1 * torch.randn(channels, generator=generator))
            module.running_var.copy_(torch.rand(channels, generator=generator) + 0.5)
            module.weight.data.copy_(torch.rand(channels, generator=generator) + 0.5)
            module.bias.data.copy_(0.1 * torch.randn(channels, generator=generator))
    return model.eval(), (torch.randn(batch, 3, size, size),)


def bert(batch: int = 2, sequence: int = 32, hidden: int = 64, layers: int = 2, heads: int = 4) -> \
        tuple[nn.Module, Inputs]:
    """A BERT encoder stack (`transformers.BertModel`, random weights) of `layers` layers of width `hidden`, and
    token ids [batch, sequence]."""
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                                     intermediate_size=4 * hidden, vocab_size=1000, max_position_embeddings=512)
    model = transformers.BertModel(config).eval()
    return model, (torch.randint(0, config.vocab_size, (batch, sequence)),)


MODELS: dict[str, Callable[..., tuple[nn.Module, Inputs]]] = {"mlp": mlp, "resnet18": resnet18, "bert": bert}


def outputs_of(result: object) -> list[torch.Tensor]:
    """The tensors of a model's result: a tensor, a tuple of them, or a transformers output (its tensor fields)."""
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for item in result for t in outputs_of(item)]
    return [t for t in result.values() if isinstance(t, torch.Tensor)] if hasattr(result, "values") else []


class TensorOutputs(nn.Module):
    """`model` returning its tensors as a tuple (what torch's TorchScript-based exporter can trace)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The model's result's tensors."""
        return tuple(outputs_of(self.model(*inputs)))


def onnx_bytes(model: nn.Module, inputs: Inputs, dynamic_batch: bool = True, legacy: bool = False) -> bytes:
    """The model exported by `torch.onnx.export`, with a symbolic batch dimension: by its default exporter, or by
    the TorchScript-based one (`legacy`, opset 17)."""
    names = [f"input{k}" for k in range(len(inputs))]
    buffer = io.BytesIO()
    with torch.no_grad():
        if legacy:
            axes = {name: {0: "batch"} for name in names} if dynamic_batch else None
            torch.onnx.export(TensorOutputs(model), inputs, buffer, input_names=names, dynamic_axes=axes,
                              dynamo=False, opset_version=17)
        else:
            shapes = tuple({0: torch.export.Dim("batch")} for _ in inputs) if dynamic_batch else None
            program = torch.onnx.export(model, inputs, input_names=names, dynamic_shapes=shapes, dynamo=True,
                                        verbose=False)
            program.save(buffer)
    return buffer.getvalue()


def main() -> None:
    import stdlib_ops as ops

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    for name, make in MODELS.items():
        model, inputs = make()
        with torch.no_grad():
            want = outputs_of(model(*inputs))
            start = time.perf_counter()
            compiled = torch.compile(model, backend="hidet_lang", options={"target": args.target})
            got = outputs_of(compiled(*inputs))
            compile_s = time.perf_counter() - start
        error = max(float((g.cpu() - w).abs().max()) for g, w in zip(got, want))
        print(f"{name:9} torch.compile: built and ran in {compile_s:5.1f} s, max |error| {error:.2e}")
        import onnx

        start = time.perf_counter()
        graph = ops.optimize(ops.from_onnx(onnx.load_from_string(onnx_bytes(model, inputs))))
        result = graph.build(args.target)(*[t.numpy() for t in inputs])
        got = [torch.from_numpy(t.numpy()) for t in (result if isinstance(result, tuple) else (result,))]
        error = max(float((g - w).abs().max()) for g, w in zip(got, want))
        print(f"{name:9} ONNX:          built and ran in {time.perf_counter() - start:5.1f} s, max |error| "
              f"{error:.2e}, {len(graph.groups or [])} kernels")


if __name__ == "__main__":
    main()
