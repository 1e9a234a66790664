"""The `torch.compile` backend: `torch.compile(model, backend="hidet_lang")` (registered at install through the
`torch_dynamo_backends` entry point) or `torch.compile(model, backend=hidet_lang_backend)`.

Dynamo hands the backend each FX graph it captures with example inputs; the backend converts it (`torch_fx`),
optimizes it (`stdlib_ops.optimize`), builds it once and returns a callable that takes the graph's arguments (torch
tensors, the lifted parameters and sizes included, as Dynamo passes them) and returns torch tensors in the graph's
output structure. Tensors go in and come out without copies (DLPack) where torch's memory and the compiled
graph's are the same kind: CPU tensors on the 'cpu' target, and CUDA tensors on the 'cuda' target on a GPU (each
side's work ordered on the other's current stream); elsewhere (torch CPU tensors on the 'cuda' target, which runs
on the CUDA emulator without a GPU) the inputs are copied to the graph's device and the outputs back.
The compiled graph computes values only (inference): its outputs carry no autograd history. An input the graph
writes in place (`x.add_(1)`) gets its new contents after the call, as in torch eager (`torch_fx`).

Options (`torch.compile(..., options={...})`, which torch passes on as the keyword argument `options`):
`target` ('cpu' or 'cuda'; by default the example inputs' device), `tune` (bool: tune the templates' schedules
for this machine before building), `mode` (torch's modes: 'default', 'reduce-overhead', 'max-autotune' and
'max-autotune-no-cudagraphs', the last two meaning tune=True). torch passes `torch.compile(..., mode=...)` as the
keyword argument `mode`, and never both `mode` and `options`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx
from torch.utils import _pytree as pytree

import stdlib_ops as ops
from hidet_lang.target import Target
from stdlib_ops.frontends.torch_fx import SOURCE, FxConversion, from_fx
from stdlib_ops.graph.compiled import CompiledGraph

MODES = {"default": False, "reduce-overhead": False, "max-autotune": True, "max-autotune-no-cudagraphs": True}
OPTIONS = ("target", "tune", "mode")


@dataclass(frozen=True)
class BackendOptions:
    """What the backend was asked for: `target` (None: from the example inputs) and `tune`."""

    target: Target | None = None
    tune: bool = False


def parse_options(options: dict[str, Any] | None = None, mode: str | None = None) -> BackendOptions:
    """The backend's options from torch.compile's `options` dict and `mode`; ValueError for anything else."""
    given = dict(options or {})
    unknown = sorted(set(given) - set(OPTIONS))
    if unknown:
        raise ValueError(f"{SOURCE}: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"the options are {', '.join(map(repr, OPTIONS))}")
    mode = given.get("mode", mode) or "default"
    if mode not in MODES:
        raise ValueError(f"{SOURCE}: unknown mode {mode!r}; the modes are {', '.join(map(repr, MODES))}")
    target = given.get("target")
    if target is not None:
        try:
            target = Target.of(target)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{SOURCE}: option 'target': {exc}") from None
    tune = given.get("tune", MODES[mode])
    if not isinstance(tune, bool):
        raise ValueError(f"{SOURCE}: option 'tune' must be True or False, got {tune!r}")
    return BackendOptions(target, tune)


def hidet_lang_backend(gm: fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> CompiledFxGraph:
    """The `torch.compile` backend: `gm` converted, optimized and built once; the callable Dynamo runs in its
    place. Keyword arguments: `options` (a dict, see the module docstring) and `mode`, as torch.compile passes
    them."""
    unexpected = sorted(set(kwargs) - {"options", "mode"})
    if unexpected:
        raise TypeError(f"{SOURCE}: unexpected keyword argument{'s' if len(unexpected) > 1 else ''} "
                        f"{', '.join(unexpected)} (torch.compile passes options=... and mode=...)")
    settings = parse_options(kwargs.get("options"), kwargs.get("mode"))
    target = settings.target or default_target(example_inputs)
    conversion = from_fx(gm, example_inputs, target.device)
    compiled = None
    if conversion.graph is not None:
        graph = ops.optimize(conversion.graph)
        if settings.tune:
            ops.tune(graph, target, sizes=example_sizes(conversion, example_inputs))
        compiled = graph.build(target)
    return CompiledFxGraph(conversion, compiled, torch_device(example_inputs, conversion.input_positions))


def default_target(example_inputs: Sequence[Any]) -> Target:
    """'cuda' when an example input is a CUDA tensor, else 'cpu'."""
    cuda = any(isinstance(t, torch.Tensor) and t.device.type == "cuda" for t in example_inputs)
    return Target.for_device("cuda" if cuda else "cpu")


def torch_device(example_inputs: Sequence[Any], positions: Sequence[int]) -> torch.device:
    """The torch device the outputs go to: the user's first input tensor's (the CPU without one)."""
    for p in positions:
        return example_inputs[p].device
    return torch.device("cpu")


def example_sizes(conversion: FxConversion, example_inputs: Sequence[Any]) -> dict[str, int]:
    """The value each symbolic size has in the example inputs (what tuning times the kernels at)."""
    return {name: int(example_inputs[p].shape[axis]) for name, (p, axis) in conversion.size_sources.items()}


class CompiledFxGraph:
    """An FX graph compiled by stdlib_ops, called as the FX graph is: every placeholder's argument in order (the
    user's tensors, and the lifted parameters and sizes, which the compiled graph holds already or reads from the
    tensors' shapes); returns torch tensors in the FX graph's output structure, after copying into the input
    tensors the graph writes in place their new contents."""

    def __init__(self, conversion: FxConversion, compiled: CompiledGraph | None, device: torch.device) -> None:
        self.conversion = conversion
        self.compiled = compiled
        self.device = device

    @property
    def kernels(self) -> list[str]:
        """The kernels launched per call."""
        return self.compiled.kernels if self.compiled is not None else []

    def __call__(self, *args: Any) -> Any:
        conversion = self.conversion
        results: Any = ()
        if self.compiled is not None:
            on_gpu = self.compiled.target.is_cuda and not self.compiled.target.emulated
            results = self.compiled(*[_runtime_input(args[p], on_gpu) for p in conversion.input_positions])
            results = results if isinstance(results, tuple) else (results,)
        leaves = [self._leaf(kind, what, args, results) for kind, what in conversion.outputs]
        contents = [(args[p], self._leaf(kind, what, args, results)) for p, (kind, what) in conversion.input_writes]
        with torch.no_grad():
            for tensor, new in contents:
                tensor.copy_(new)
        return pytree.tree_unflatten(leaves, conversion.out_spec)

    def _leaf(self, kind: str, what: Any, args: Sequence[Any], results: Sequence[Any]) -> Any:
        if kind == "graph":
            return to_torch(results[what], self.device)
        if kind == "arg":
            return args[what]
        if kind == "size":
            position, axis = self.conversion.size_sources[what]
            return int(args[position].shape[axis])
        return what


def to_torch(t: ops.Tensor, device: torch.device | None = None) -> torch.Tensor:
    """A compiled graph's output as a torch tensor on `device` (the CPU by default): a view of its memory where it
    is memory of that kind (host memory for the CPU: the 'cpu' device and the CUDA emulator's; GPU memory for a
    CUDA device), a copy otherwise."""
    device = device or torch.device("cpu")
    on_gpu = t.storage is not None and getattr(t.storage, "on_gpu", False)
    if on_gpu != (device.type == "cuda"):
        return torch.from_numpy(t.numpy()).to(device)
    return torch.from_dlpack(t)


def _runtime_input(t: Any, on_gpu: bool) -> Any:
    """A torch tensor as the compiled graph takes it, without autograd history: itself (read through DLPack, no
    copy) on the CPU, and on a CUDA device where the graph runs on a GPU (`on_gpu`); a CPU copy otherwise."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{SOURCE}: the compiled graph takes tensors for its inputs, got {type(t).__name__}")
    t = t.detach()
    return t if t.device.type == "cpu" or (on_gpu and t.device.type == "cuda") else t.cpu()
