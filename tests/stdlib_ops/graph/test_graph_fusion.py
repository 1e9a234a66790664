"""Fused graphs equal the unfused computation: hypothesis draws chains of elementwise operators (constants,
constant tensors broadcast along the last axis or along axis 1, relu, tanh, neg, sigmoid) before each input and
after an anchor (matmul, a sum, softmax, conv2d with padding, attention on CUDA), and the data and sizes (1, 7,
33); the optimized graph is one kernel and agrees with the same graph built unfused (one kernel per operator) and with
numpy. One graph per drawn chain serves every drawn size (symbolic 'm'). On CUDA, attention fuses into its
template's kernel, which also passes the emulator's checks with prologues and epilogues injected."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdlib_ops as ops
from codegen.build import build_module
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.templates.registry import choose_schedule

SIZES = st.sampled_from([1, 7, 33])
QUARTERS = st.sampled_from([q / 4 for q in range(-8, 9)])
K, N = 7, 5  # the anchor's fixed sizes: x is ['m', K]


def elementwise() -> st.SearchStrategy[tuple]:
    return st.one_of(
        st.tuples(st.sampled_from(["add", "mul"]), QUARTERS),
        st.tuples(st.sampled_from(["add_row", "add_channel"]), st.integers(0, 2**16)),
        st.tuples(st.sampled_from(["relu", "tanh", "neg", "sigmoid"])),
    )


def chains() -> st.SearchStrategy[tuple]:
    return st.lists(elementwise(), min_size=0, max_size=3).map(tuple)


def apply_ops(chain: tuple, t: ops.Tensor) -> ops.Tensor:
    for step in chain:
        kind = step[0]
        if kind == "add":
            t = t + step[1]
        elif kind == "mul":
            t = t * step[1]
        elif kind == "add_row":
            t = t + ops.asarray(_row(step[1], t.shape[-1]))
        elif kind == "add_channel":
            t = t + ops.asarray(_channel(step[1], t.shape))
        else:
            t = getattr(ops, kind)(t)
    return t


def apply_numpy(chain: tuple, v: np.ndarray) -> np.ndarray:
    for step in chain:
        kind = step[0]
        if kind == "add":
            v = v + np.float32(step[1])
        elif kind == "mul":
            v = v * np.float32(step[1])
        elif kind == "add_row":
            v = v + _row(step[1], v.shape[-1])
        elif kind == "add_channel":
            v = v + _channel(step[1], v.shape)
        elif kind == "relu":
            v = np.maximum(v, np.float32(0))
        elif kind == "neg":
            v = -v
        elif kind == "tanh":
            v = np.tanh(v)
        else:
            v = np.float32(1) / (np.float32(1) + np.exp(-v))
    return v.astype(np.float32)


def _row(seed: int, n: int) -> np.ndarray:
    return (np.random.default_rng(seed).integers(-8, 9, n) / 4).astype(np.float32)


def _channel(seed: int, shape: tuple) -> np.ndarray:
    """Quarters along axis 1 of `shape`, broadcast over the axes after it (a per-channel bias)."""
    return _row(seed, shape[1]).reshape(shape[1], *[1] * (len(shape) - 2))


W = (np.random.default_rng(1).integers(-8, 9, (K, N)) / 4).astype(np.float32)


def softmax_np(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


C, H, WIDTH, OUT_C = 2, 5, 6, 3  # conv2d: x is ['m', C, H, WIDTH], a 3x3 kernel, padding 1
CONV_W = (np.random.default_rng(2).integers(-8, 9, (OUT_C, C, 3, 3)) / 4).astype(np.float32)
SQ, SK, D = 7, 9, 16  # attention: q is ['m', SQ, D], k and v are ['m', SK, D]
UNIT = 2.0**-24  # the unit roundoff of f32
AFTER_GAIN = 8  # the most a drawn chain after the anchor scales an error by: three multiplications by 2


def conv2d_np(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """conv2d with a 3x3 kernel, stride 1 and padding 1, in f64."""
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w.astype(np.float64))


def conv2d_tolerance(x: np.ndarray) -> float:
    """A sum of n = C * 9 rounded products is within (n + 1) ulp of the sum of their magnitudes."""
    terms = C * 9
    return AFTER_GAIN * (terms + 1) * UNIT * float(conv2d_np(np.abs(x), np.abs(CONV_W)).max(initial=0.0)) + 1e-6


def attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False) -> np.ndarray:
    """softmax(q k^T / sqrt(D) (+ the mask allowing key j for query i when j <= i if `causal`)) v in f64."""
    s = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2) / math.sqrt(D)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v.astype(np.float64)


def attention_tolerance(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> float:
    """A score (a sum of D rounded products) is within (D + 1) ulp of the sum of its terms' magnitudes; an error
    e in the scores changes the softmax weights by a factor within exp(+-2e), so the output (a weighted mean of v,
    with exp and the sums rounded too) moves by about (4e + 8 ulp) times max |v|."""
    magnitude = float((np.abs(q.astype(np.float64)) @ np.abs(np.swapaxes(k, -1, -2))).max(initial=0.0))
    score_error = (D + 1) * UNIT * magnitude / math.sqrt(D)
    return AFTER_GAIN * (4 * score_error + 8 * UNIT) * max(1.0, float(np.abs(v).max(initial=0.0))) + 1e-6


@dataclass(frozen=True)
class AnchorCase:
    """An anchor operator over symbolic inputs of `shapes`, its numpy reference, and the absolute tolerance of a
    result from the anchor's (numpy) inputs."""

    shapes: tuple[tuple, ...]
    make: Callable[..., ops.Tensor]
    reference: Callable[..., np.ndarray]
    tolerance: Callable[..., float] = lambda *_: 1e-5


ANCHORS: dict[str, AnchorCase] = {
    "matmul": AnchorCase((("m", K),), lambda t: ops.matmul(t, ops.asarray(W)), lambda v: v @ W),
    "sum": AnchorCase((("m", K),), lambda t: ops.sum(t, axis=-1, keepdims=True),
                      lambda v: v.sum(axis=-1, keepdims=True)),
    "softmax": AnchorCase((("m", K),), lambda t: ops.softmax(t, axis=-1), softmax_np),
    "conv2d": AnchorCase((("m", C, H, WIDTH),), lambda t: ops.conv2d(t, ops.asarray(CONV_W), padding=1),
                         lambda v: conv2d_np(v, CONV_W), conv2d_tolerance),
    "attention": AnchorCase((("m", SQ, D), ("m", SK, D), ("m", SK, D)), ops.attention, attention_np,
                            attention_tolerance),
}


CAUSAL_ATTENTION = AnchorCase(ANCHORS["attention"].shapes, lambda q, k, v: ops.attention(q, k, v, causal=True),
                              lambda q, k, v: attention_np(q, k, v, causal=True), attention_tolerance)


def fused_and_unfused(case: AnchorCase, target: str, befores: tuple, after: tuple) -> tuple:
    """The optimized and the unoptimized build of the anchor with `befores` (one chain per input) and `after`."""
    symbols = [ops.symbol(list(shape)) for shape in case.shapes]
    result = apply_ops(after, case.make(*(apply_ops(chain, t) for chain, t in zip(befores, symbols))))
    graph = ops.trace_from(result, inputs=symbols)
    fused, unfused = ops.optimize(graph).build(target), graph.build(target)
    assert len(fused.kernels) == 1, fused.kernels
    assert len(unfused.kernels) == len(graph.nodes)
    return fused, unfused


def check_chain(anchor: str, target: str, after: tuple, data: st.DataObject) -> None:
    case = ANCHORS[anchor]
    befores = tuple(data.draw(chains(), label=f"before input {k}") for k in range(len(case.shapes)))
    fused, unfused = fused_and_unfused(case, target, befores, after)
    for _ in range(3):
        m = data.draw(SIZES, label="m")
        xs = [quarters(data, (m, *shape[1:])) for shape in case.shapes]
        inputs = [apply_numpy(chain, x) for chain, x in zip(befores, xs)]
        expected = apply_numpy(after, case.reference(*inputs))
        got, plain = fused(*xs).numpy(), unfused(*xs).numpy()
        # quarter data keeps sums of few terms exact; tanh, sigmoid and exp come from the C (or CUDA) library and
        # may differ from numpy's in the last ulp or two, which the anchors' sums keep within their tolerance
        atol = case.tolerance(*inputs)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=atol)
        np.testing.assert_allclose(got, plain, rtol=1e-5, atol=atol)


def quarters(data: st.DataObject, shape: tuple[int, ...]) -> np.ndarray:
    """An f32 array of `shape` of quarters in [-2, 2], from a drawn seed (attention's inputs hold thousands)."""
    seed = data.draw(st.integers(0, 2**32 - 1), label="data seed")
    return (np.random.default_rng(seed).integers(-8, 9, shape) / 4).astype(np.float32)


@pytest.mark.parametrize("anchor", [name for name in ANCHORS if name != "attention"])  # on the CPU, attention is
@settings(max_examples=example_count(6), deadline=None)  # built as matmul, softmax and matmul (test_decompose.py)
@given(after=chains(), data=st.data())
def test_chains_around_an_anchor_cpu(anchor: str, after: tuple, data: st.DataObject) -> None:
    check_chain(anchor, "cpu", after, data)


@pytest.mark.parametrize("anchor", list(ANCHORS))
@settings(max_examples=example_count(2), deadline=None)
@given(after=chains(), data=st.data())
def test_chains_around_an_anchor_cuda(anchor: str, after: tuple, data: st.DataObject) -> None:
    check_chain(anchor, "cuda", after, data)


def test_causal_attention_fuses_into_its_cuda_template_which_passes_the_emulator_checks() -> None:
    befores = ((("relu",), ("mul", 0.5)), (("add", -0.25),), (("add_channel", 7), ("tanh",)))
    after = (("mul", 1.5), ("add_row", 8), ("sigmoid",))
    case = CAUSAL_ATTENTION
    fused, _ = fused_and_unfused(case, "cuda", befores, after)
    assert fused.kernels == ["relu + mul + add + add + tanh + attention* + mul + add + sigmoid"]
    symbols = [ops.symbol(list(shape)) for shape in case.shapes]
    anchor_module = choose_schedule(case.make(*symbols).producer.task, Target.of("cuda")).module
    assert the_kernel(anchor_module).name == "attention_cuda"
    fused.modules = [build_module(module, "cuda", check=True) for module in fused.ir_modules]
    rng = np.random.default_rng(4)
    xs = [(rng.integers(-8, 9, (3, *shape[1:])) / 4).astype(np.float32) for shape in case.shapes]
    inputs = [apply_numpy(chain, x) for chain, x in zip(befores, xs)]
    np.testing.assert_allclose(fused(*xs).numpy(), apply_numpy(after, case.reference(*inputs)), rtol=1e-5,
                               atol=case.tolerance(*inputs))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_relu_matmul_add_and_softmax_of_scaled_input_are_one_kernel_each(target: str) -> None:
    xs = ops.symbol(["m", K])
    b = ops.asarray(_row(3, N))
    first = ops.optimize(ops.trace_from(ops.relu(ops.matmul(xs, ops.asarray(W)) + b), [xs])).build(target)
    second = ops.optimize(ops.trace_from(ops.softmax(xs * 2 + 1), [xs])).build(target)
    assert first.kernels == ["matmul_packed* + add + relu" if target == "cpu" else "matmul* + add + relu"]
    assert second.kernels == ["mul + add + softmax*"]
    x = _row(5, 33 * K).reshape(33, K)
    np.testing.assert_allclose(first(x).numpy(), np.maximum(x @ W + _row(3, N), 0), rtol=1e-6)
    np.testing.assert_allclose(second(x).numpy(), softmax_np(x * 2 + 1), rtol=1e-5, atol=1e-7)
