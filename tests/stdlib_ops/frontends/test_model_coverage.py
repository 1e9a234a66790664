"""The torch frontend's coverage measured on real code: the forward pass of small `transformers` models (GPT-2,
BERT, Llama, Mistral, the T5 encoder, ViT, the Whisper encoder; `coverage_models`) built from configs with random
weights, and nanoGPT's block as its author writes it, through `torch.compile` with a backend that lists every torch
operation the conversion table lacks (each graph Dynamo captures is checked; one with gaps runs eagerly, so that the
whole forward pass is listed). Every model must list none, and its outputs must equal torch eager's within the
rounding of float32 arithmetic. Nothing is downloaded: the models come from config objects, offline."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # transformers must not reach the network: configs only, no weights to fetch
torch = pytest.importorskip("torch", reason="the coverage test needs torch (the `frontends` extra)")
pytest.importorskip("transformers", reason="the coverage test needs transformers (the `frontends` extra)")

from torch.nn import functional as F  # noqa: E402, N812

from stdlib_ops.frontends.torch_backend import CompiledFxGraph, hidet_lang_backend  # noqa: E402
from stdlib_ops.frontends.torch_fx import unsupported_operations  # noqa: E402
from tests.stdlib_ops.frontends.coverage_models import MODELS, CoverageModel, built, outputs  # noqa: E402

EPS = float(np.finfo(np.float32).eps)
STAGES = 8
"""Sums a layer rounds in sequence: the attention's projection, scores and weighted values, its output projection,
the MLP's two products and two norms."""


class Listing:
    """A torch.compile backend that lists the operations the table lacks in every graph Dynamo captures
    (`missing`: name -> node names, over all graphs), converts the graphs with none (`compiled`), and runs the
    others eagerly so that Dynamo goes on through the rest of the model."""

    def __init__(self) -> None:
        self.missing: dict[str, list[str]] = {}
        self.compiled: list[CompiledFxGraph] = []
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Any:
        self.graphs += 1
        gaps = unsupported_operations(gm)
        for name, places in gaps.items():
            self.missing.setdefault(name, []).extend(places)
        if gaps:
            return gm.forward
        self.compiled.append(hidet_lang_backend(gm, example_inputs, **kwargs))
        return self.compiled[-1]

    def report(self) -> str:
        """The missing operations, one a line with their counts and first nodes."""
        return "\n".join(f"  {name} x{len(places)} (at {', '.join(places[:3])})"
                         for name, places in self.missing.items())


def compiled_run(name: str) -> tuple[Listing, list[torch.Tensor], list[torch.Tensor], CoverageModel]:
    """Model `name` through the listing backend: the backend, the compiled outputs, torch eager's, and the model."""
    torch._dynamo.reset()
    case = built(name)
    backend = Listing()
    with torch.no_grad():
        want = outputs(case.model(**case.inputs))
        got = outputs(torch.compile(case.model, backend=backend, dynamic=False)(**case.inputs))
    return backend, got, want, case


def tolerance(case: CoverageModel) -> float:
    """The largest difference from torch eager allowed, in units of an output's scale (its largest magnitude).

    Both sides compute the same float32 sums in different orders (blocked matmul templates against torch's
    kernels; AVX2 and AVX-512 machines order them differently again). Two orders of a sum of n terms differ by at
    most about n ulps of the sum of the terms' magnitudes (the worst case of recursive summation), and the norms
    bring each layer's output back to unit scale, so each layer adds the errors of its own sums rather than
    multiplying the earlier ones: at most (layers + 1) x STAGES x widest x eps of the output's scale, the one more
    for the embeddings and the head. The errors seen
    are a few ulps of it, far inside this worst case, which holds for any summation order."""
    return (case.layers + 1) * STAGES * case.widest * EPS


@pytest.mark.parametrize("name", MODELS)
def test_forward_pass_converts_every_operation_and_matches_eager(name: str) -> None:
    backend, got, want, case = compiled_run(name)
    assert not backend.missing, f"{name}: torch operations the conversion table lacks:\n{backend.report()}"
    assert backend.graphs == len(backend.compiled) >= 1
    assert len(got) == len(want), f"{name}: {len(got)} outputs, torch eager gives {len(want)}"
    bound = tolerance(case)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, k, g.dtype, w.dtype, g.shape, w.shape)
        scale = float(w.abs().max()) if w.is_floating_point() else 0.0
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=0, atol=bound * scale, err_msg=f"{name} output {k}")


def test_nanogpt_masked_fill_attention_becomes_one_attention_kernel() -> None:
    masked = compiled_run("nanogpt-block")[0]
    flash = compiled_run("nanogpt-block-flash")[0]
    kernels = [kernel for graph in masked.compiled for kernel in graph.kernels]
    assert len(kernels) == sum(len(graph.kernels) for graph in flash.compiled)
    assert sum("attention" in kernel for kernel in kernels) == 1, kernels  # the mask is a causal attention's


def test_the_listing_names_each_missing_operation_and_still_runs_the_model() -> None:
    torch._dynamo.reset()
    backend = Listing()

    def uses_cumprod(x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x.relu(), dim=0).flip(0) * 2

    x = torch.randn(5, 3)
    got = torch.compile(uses_cumprod, backend=backend)(x)
    assert backend.missing == {"torch.cumprod": ["cumprod"], "Tensor.flip": ["flip"]}
    assert backend.compiled == []
    torch.testing.assert_close(got, uses_cumprod(x))


def mask_by_lower_triangle(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The causal mask built inline from `torch.tril(torch.ones(...))` and applied with `masked_fill(~mask, -inf)`."""
    n = q.size(-2)
    keep = torch.tril(torch.ones(n, n, device=q.device, dtype=torch.bool))
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    return F.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ v


def mask_by_additive_triangle(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The causal mask as an additive -inf upper triangle (`torch.full(...).triu(1)`)."""
    n = q.shape[2]
    hidden = torch.full((n, n), float("-inf"), device=q.device).triu(1)
    return (q @ k.transpose(-2, -1) * q.size(-1) ** -0.5 + hidden).softmax(-1) @ v


def mask_in_place(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The causal mask by `torch.triu(..., diagonal=1)` written in place with a large negative fill."""
    n = q.shape[2]
    hidden = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    scores = (q @ k.mT) * 0.25
    scores.masked_fill_(hidden, -1e9)
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize("attention", [mask_by_lower_triangle, mask_by_additive_triangle, mask_in_place],
                         ids=lambda f: f.__name__)
def test_causal_masks_as_tutorials_write_them_become_one_attention(attention: Callable[..., torch.Tensor]) -> None:
    torch._dynamo.reset()
    backend = Listing()
    generator = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 2, 6, 16, generator=generator) for _ in range(3))
    got = torch.compile(attention, backend=backend)(q, k, v)
    assert not backend.missing, backend.report()
    assert [kernel for graph in backend.compiled for kernel in graph.kernels] == ["attention"]
    # The scores are sums of 16 products, the softmax sums 6 terms and the output 6 products, each within n ulps
    # of its scale in any order; the softmax's exponent turns a score's absolute error into a relative error of the
    # weights, and the scores (unit-normal dot products over 16 scaled by 1/4) stay below 4 in magnitude.
    want = attention(q, k, v)
    bound = 4 * (16 + 6 + 6) * EPS * float(want.abs().max())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=bound)
