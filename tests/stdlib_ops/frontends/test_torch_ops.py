"""The torch -> stdlib_ops table (`stdlib_ops.frontends.torch_ops`) entry by entry against torch eager: each case is
a tiny function or module traced by `torch.fx.symbolic_trace`, converted by `from_fx`, optimized, built for the CPU
and called as the backend calls it, on hypothesis-drawn shapes (odd sizes included) and data."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch import fx, nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402, N812

import stdlib_ops as ops  # noqa: E402
from hidet_lang.testing import example_count  # noqa: E402
from stdlib_ops.frontends.torch_backend import CompiledFxGraph  # noqa: E402
from stdlib_ops.frontends.torch_fx import from_fx  # noqa: E402

SETTINGS = settings(max_examples=example_count(2), deadline=None)  # each drawn shape compiles its kernels
EPS = float(np.finfo(np.float32).eps)
# tolerances (rtol, atol) by kind of computation, for float32 results of inputs in [-4, 4]:
EXACT = (0.0, 0.0)  # data movement, comparisons, selection, max/min: the same float32 values as torch
ELEMENTWISE = (8 * EPS, 1e-6)  # one rounding each in torch and here, a few ulps apart for exp/erf/tanh/pow
TRANSCENDENTAL = (64 * EPS, 1e-5)  # composed formulas (gelu's tanh form, softmax, norms): errors of several steps


def reduction(n: int) -> tuple[float, float]:
    """Sums of n terms of magnitude <= 16: the float32 rounding error grows like n ulps of the largest partial sum."""
    return (n * 2 * EPS, n * 16 * EPS)


def convert_and_run(fn: Callable[..., Any], *inputs: np.ndarray) -> Any:
    """`fn` traced, converted, built for the CPU and called on `inputs` as torch tensors."""
    args = [torch.from_numpy(a) for a in inputs]
    gm = fx.symbolic_trace(fn if isinstance(fn, nn.Module) else _python_function(fn, len(args)))
    conversion = from_fx(gm, args)
    compiled = None if conversion.graph is None else ops.optimize(conversion.graph).build("cpu")
    return CompiledFxGraph(conversion, compiled, torch.device("cpu"))(*args)


def _python_function(fn: Callable[..., Any], arity: int) -> Callable[..., Any]:
    """A Python function of `arity` arguments calling `fn` (symbolic_trace takes a builtin for no function, and
    a function's defaulted parameters for inputs)."""
    return [lambda a: fn(a), lambda a, b: fn(a, b), lambda a, b, c: fn(a, b, c)][arity - 1]


def check(fn: Callable[..., Any], inputs: list[np.ndarray], tol: tuple[float, float]) -> None:
    """The converted `fn` equals torch's `fn` on `inputs` within `tol` (every output of a tuple)."""
    got = convert_and_run(fn, *inputs)
    with torch.no_grad():
        want = fn(*[torch.from_numpy(a) for a in inputs])
    for g, w in zip(_flat(got), _flat(want)):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=tol[0], atol=tol[1])


def _flat(value: Any) -> list[Any]:
    return [v for item in value for v in _flat(item)] if isinstance(value, (tuple, list)) else [value]


def floats(draw: st.DataObject, shape: tuple, lo: float = -4.0, hi: float = 4.0) -> np.ndarray:
    """float32 data of `shape` in [lo, hi]."""
    return draw.draw(st.builds(lambda s: np.random.default_rng(s).uniform(lo, hi, shape).astype(np.float32),
                               st.integers(0, 2**32 - 1)))


def shape(draw: st.DataObject, rank: int, hi: int = 7) -> tuple:
    """A shape of `rank` sides in [1, hi]."""
    return tuple(draw.draw(st.integers(1, hi)) for _ in range(rank))


Case = tuple[Callable[..., Any], Callable[[st.DataObject], list[np.ndarray]], tuple[float, float]]


def one(lo: float = -4.0, hi: float = 4.0, rank: int = 3) -> Callable[[st.DataObject], list[np.ndarray]]:
    """One float input of a drawn shape."""
    return lambda d: [floats(d, shape(d, rank), lo, hi)]


def two(rank: int = 3) -> Callable[[st.DataObject], list[np.ndarray]]:
    """Two float inputs, the second broadcast against the first (some of its sides 1)."""

    def make(d: st.DataObject) -> list[np.ndarray]:
        s = shape(d, rank)
        t = tuple(1 if d.draw(st.booleans()) else n for n in s)
        return [floats(d, s), floats(d, t[d.draw(st.integers(0, rank - 1)):])]

    return make


POSITIVE = one(0.25, 4.0)

UNARY: dict[str, Case] = {
    "torch.neg": (torch.neg, one(), EXACT), "operator.neg": (operator.neg, one(), EXACT),
    "Tensor.neg": (lambda x: x.neg(), one(), EXACT),
    "torch.exp": (torch.exp, one(), ELEMENTWISE), "Tensor.exp": (lambda x: x.exp(), one(), ELEMENTWISE),
    "torch.log": (torch.log, POSITIVE, ELEMENTWISE), "Tensor.log": (lambda x: x.log(), POSITIVE, ELEMENTWISE),
    "torch.sqrt": (torch.sqrt, POSITIVE, ELEMENTWISE), "torch.rsqrt": (torch.rsqrt, POSITIVE, ELEMENTWISE),
    "Tensor.sqrt": (lambda x: x.sqrt(), POSITIVE, ELEMENTWISE),
    "torch.sigmoid": (torch.sigmoid, one(), ELEMENTWISE), "F.sigmoid": (F.sigmoid, one(), ELEMENTWISE),
    "Tensor.sigmoid": (lambda x: x.sigmoid(), one(), ELEMENTWISE),
    "torch.tanh": (torch.tanh, one(), ELEMENTWISE), "Tensor.tanh": (lambda x: x.tanh(), one(), ELEMENTWISE),
    "torch.relu": (torch.relu, one(), EXACT), "F.relu": (F.relu, one(), EXACT),
    "F.relu(inplace)": (lambda x: F.relu(x * 1, inplace=True), one(), EXACT),
    "Tensor.relu": (lambda x: x.relu(), one(), EXACT), "Tensor.relu_": (lambda x: (x * 1).relu_(), one(), EXACT),
    "F.gelu": (F.gelu, one(), ELEMENTWISE),
    "F.gelu(tanh)": (lambda x: F.gelu(x, approximate="tanh"), one(), TRANSCENDENTAL),
    "F.silu": (F.silu, one(), ELEMENTWISE), "F.leaky_relu": (lambda x: F.leaky_relu(x, 0.2), one(), EXACT),
    "F.relu6": (F.relu6, one(-8, 8), EXACT), "F.hardtanh": (F.hardtanh, one(), EXACT),
    "torch.abs": (torch.abs, one(), EXACT), "Tensor.abs": (lambda x: x.abs(), one(), EXACT),
    "torch.erf": (torch.erf, one(), ELEMENTWISE), "torch.floor": (torch.floor, one(), EXACT),
    "torch.clamp": (lambda x: torch.clamp(x, -1.0, 2.0), one(), EXACT),
    "Tensor.clamp(min)": (lambda x: x.clamp(min=0.5), one(), EXACT),
    "Tensor.clamp(max)": (lambda x: x.clamp(max=0.5), one(), EXACT),
    "operator.pow(2)": (lambda x: x ** 2, one(), EXACT), "Tensor.pow(3)": (lambda x: x.pow(3), one(), ELEMENTWISE),
    "rpow": (lambda x: 2.0 ** x, one(), ELEMENTWISE), "sqrt as pow": (lambda x: x ** 0.5, POSITIVE, ELEMENTWISE),
    "scalar - x": (lambda x: 2.5 - x, one(), EXACT), "x * scalar": (lambda x: x * 3, one(), EXACT),
    "scalar / x": (lambda x: 1.0 / x, POSITIVE, ELEMENTWISE), "x + scalar": (lambda x: 1 + x, one(), EXACT),
    "torch.rsub": (lambda x: torch.rsub(x, 2.0), one(), EXACT),
    "torch.div(trunc)": (lambda x: torch.div(x, 0.75, rounding_mode="trunc"), one(), EXACT),
    "operator.floordiv": (lambda x: x // 0.75, one(), EXACT),
    "F.pad": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), one(), EXACT),
    "F.pad(all axes)": (lambda x: F.pad(x, (0, 1, 2, 0, 1, 1)), one(), EXACT),
    "Tensor.cumsum(bool)": (lambda x: (x > 0).cumsum(-1), one(), EXACT),
    "torch.cumsum(int, dim 0)": (lambda x: torch.cumsum((x * 4).int(), 0), one(), EXACT),
    "torch.cumsum(0-d)": (lambda x: torch.cumsum(x[0, 0, 0], 0) + x, one(), EXACT),
    "torch.tril": (torch.tril, one(), EXACT), "Tensor.triu(1)": (lambda x: x.triu(1), one(), EXACT),
    "Tensor.tril_(-1)": (lambda x: (x * 1).tril_(-1), one(), EXACT),
    "torch.triu(bool, -2)": (lambda x: torch.triu(x > 0, diagonal=-2).float(), one(), EXACT),
    "x.float()": (lambda x: (x * 4).int().float(), one(), EXACT),
    "x.to(dtype)": (lambda x: x.to(torch.float64), one(), EXACT),
    "x.type(dtype)": (lambda x: x.type(torch.int32), one(), EXACT),
}

BINARY: dict[str, Case] = {
    "operator.add": (operator.add, two(), EXACT), "torch.add": (torch.add, two(), EXACT),
    "torch.add(alpha)": (lambda a, b: torch.add(a, b, alpha=2), two(), ELEMENTWISE),
    "Tensor.add": (lambda a, b: a.add(b), two(), EXACT),
    "operator.sub": (operator.sub, two(), EXACT), "Tensor.sub": (lambda a, b: a.sub(b), two(), EXACT),
    "operator.mul": (operator.mul, two(), EXACT), "torch.mul": (torch.mul, two(), EXACT),
    "operator.truediv": (operator.truediv, two(), ELEMENTWISE), "torch.div": (torch.div, two(), ELEMENTWISE),
    "torch.pow": (lambda a, b: torch.pow(a.abs() + 0.5, b), two(), ELEMENTWISE),
    "torch.maximum": (torch.maximum, two(), EXACT), "torch.minimum": (torch.minimum, two(), EXACT),
    "torch.max(a, b)": (torch.max, two(), EXACT),
    "operator.lt": (operator.lt, two(), EXACT), "torch.gt": (torch.gt, two(), EXACT),
    "Tensor.eq": (lambda a, b: a.eq(b.round()), two(), EXACT), "operator.ne": (operator.ne, two(), EXACT),
    "operator.ge": (operator.ge, two(), EXACT), "torch.le": (torch.le, two(), EXACT),
    "torch.where": (lambda a, b: torch.where(a > b, a, b), two(), EXACT),
    "torch.where(scalar)": (lambda a, b: torch.where(a > b, a, 0.0), two(), EXACT),
    "operator.and_": (lambda a, b: ((a > 0) & (b > 0)).float(), two(), EXACT),
    "operator.or_": (lambda a, b: ((a > 0) | (b > 0)).float(), two(), EXACT),
    "operator.invert": (lambda a, b: (~(a > b)).float(), two(), EXACT),
    "type_as": (lambda a, b: (a * 4).int().type_as(b), two(), EXACT),
    "torch.clamp(tensors)": (lambda a, b: torch.clamp(a, min=b), two(), EXACT),
    "Tensor.masked_fill(-inf)": (lambda a, b: a.masked_fill(b > 0, float("-inf")), two(), EXACT),
    "torch.masked_fill": (lambda a, b: torch.masked_fill(a, b > 1, 2), two(), EXACT),
    "Tensor.masked_fill(0-d tensor)": (lambda a, b: a.masked_fill(b < 0, a.sum() * 0 + b.max()), two(), EXACT),
    "Tensor.masked_fill_": (lambda a, b: (a * 1).masked_fill_(b == 0, 0.5) + 1, two(), EXACT),
    "Tensor.masked_fill(ints)": (lambda a, b: (a * 4).long().masked_fill(b > 0, -7), two(), EXACT),
}


@pytest.mark.parametrize("case", [*UNARY, *BINARY])
@SETTINGS
@given(draw=st.data())
def test_elementwise(case: str, draw: st.DataObject) -> None:
    fn, inputs, tol = {**UNARY, **BINARY}[case]
    check(fn, inputs(draw), tol)


REDUCTIONS: dict[str, tuple[Callable[..., Any], bool]] = {  # fn(x, dim), exact?
    "torch.sum": (lambda x, d: torch.sum(x, d), False), "Tensor.sum(keepdim)": (lambda x, d: x.sum(d, True), False),
    "torch.sum(all)": (lambda x, d: torch.sum(x), False), "torch.mean": (lambda x, d: torch.mean(x, d), False),
    "Tensor.mean(dims)": (lambda x, d: x.mean((0, -1), keepdim=True), False),
    "torch.amax": (lambda x, d: torch.amax(x, d), True), "Tensor.amin": (lambda x, d: x.amin(d, keepdim=True), True),
    "torch.max(all)": (lambda x, d: torch.max(x), True), "torch.max(dim)": (lambda x, d: torch.max(x, d), True),
    "Tensor.max(dim)[0]": (lambda x, d: x.max(dim=d, keepdim=True)[0], True),
    "torch.min(dim)": (lambda x, d: torch.min(x, d), True), "torch.argmax": (lambda x, d: torch.argmax(x, d), True),
    "torch.var": (lambda x, d: torch.var(x, d), False), "Tensor.std": (lambda x, d: x.std(d, unbiased=False), False),
    "torch.softmax": (lambda x, d: torch.softmax(x, d), False),
    "torch.cumsum": (lambda x, d: torch.cumsum(x, d), False), "Tensor.cumsum": (lambda x, d: x.cumsum(dim=d), False),
    "F.softmax": (lambda x, d: F.softmax(x, dim=d), False),
    "Tensor.softmax": (lambda x, d: x.softmax(d), False),
    "F.log_softmax": (lambda x, d: F.log_softmax(x, dim=d), False),
}


@pytest.mark.parametrize("case", REDUCTIONS)
@SETTINGS
@given(draw=st.data())
def test_reduction(case: str, draw: st.DataObject) -> None:
    fn, exact = REDUCTIONS[case]
    x = floats(draw, shape(draw, 3, 9))
    dim = draw.draw(st.integers(-3, 2))
    check(lambda t: fn(t, dim), [x], EXACT if exact else reduction(x.size))


def matmul_inputs(a: tuple, b: tuple) -> Callable[[st.DataObject], list[np.ndarray]]:
    """Operands whose shapes name sides by letter (m, k, n, b: drawn once each, shared between operands)."""

    def make(d: st.DataObject) -> list[np.ndarray]:
        sides = {c: d.draw(st.integers(1, 17)) for c in "bmkn"}
        return [floats(d, tuple(sides[c] for c in a)), floats(d, tuple(sides[c] for c in b))]

    return make


MATMULS: dict[str, tuple[Callable[..., Any], Callable[[st.DataObject], list[np.ndarray]]]] = {
    "torch.matmul": (torch.matmul, matmul_inputs("bmk", "kn")), "operator.matmul": (operator.matmul,
                                                                                   matmul_inputs("mk", "bkn")),
    "Tensor.matmul(vector)": (lambda a, b: a.matmul(b), matmul_inputs("mk", "k")),
    "torch.bmm": (torch.bmm, matmul_inputs("bmk", "bkn")), "torch.mm": (torch.mm, matmul_inputs("mk", "kn")),
    "Tensor.mm": (lambda a, b: a.mm(b), matmul_inputs("mk", "kn")),
    "torch.addmm": (lambda a, b: torch.addmm(b[0], a, b, beta=0.5, alpha=2.0), matmul_inputs("mk", "kn")),
    "F.linear": (lambda a, w: F.linear(a, w, w[:, 0]), matmul_inputs("bmk", "nk")),
    "torch.baddbmm": (lambda a, b: torch.baddbmm(a[:, :, :1], a, b, beta=0.5, alpha=2.0), matmul_inputs("bmk", "bkn")),
    "Tensor.baddbmm(keywords)": (lambda a, b: a[:, :, :1].baddbmm(batch1=a, batch2=b), matmul_inputs("bmk", "bkn")),
    "F.linear(no bias)": (F.linear, matmul_inputs("mk", "nk")),
    "Tensor.t": (lambda a, b: a @ b.t(), matmul_inputs("mk", "nk")),
}


@pytest.mark.parametrize("case", MATMULS)
@SETTINGS
@given(draw=st.data())
def test_matmul(case: str, draw: st.DataObject) -> None:
    fn, inputs = MATMULS[case]
    a, b = inputs(draw)
    check(fn, [a, b], reduction(4 * a.shape[-1]))


MOVES: dict[str, Callable[..., Any]] = {
    "torch.cat": lambda x: torch.cat([x, x * 2], dim=1), "torch.concat": lambda x: torch.concat((x, x), -1),
    "torch.stack": lambda x: torch.stack([x, x + 1], 1), "torch.split": lambda x: torch.split(x, 2, dim=0),
    "Tensor.split(sizes)": lambda x: x.split([1, x.shape[2] - 1], 2),
    "torch.chunk": lambda x: torch.chunk(x, 2, -1), "Tensor.chunk": lambda x: x.chunk(3, 1),
    "torch.unbind": lambda x: torch.unbind(x, 1),
    "torch.squeeze": lambda x: torch.squeeze(x[:, :1]), "Tensor.squeeze(dim)": lambda x: x[:1].squeeze(0),
    "Tensor.squeeze(any dim)": lambda x: x[:, :1].squeeze((1, 2)),
    "torch.unsqueeze": lambda x: torch.unsqueeze(x, 1), "Tensor.unsqueeze": lambda x: x.unsqueeze(-1),
    "torch.flatten": lambda x: torch.flatten(x, 1), "Tensor.flatten": lambda x: x.flatten(),
    "Tensor.permute": lambda x: x.permute(2, 0, 1), "torch.permute": lambda x: torch.permute(x, (1, 2, 0)),
    "torch.transpose": lambda x: torch.transpose(x, 0, 2), "Tensor.transpose": lambda x: x.transpose(-1, -2),
    "Tensor.view": lambda x: x.view(-1), "Tensor.view(sizes)": lambda x: x.view(x.size(0), -1),
    "torch.reshape": lambda x: torch.reshape(x, (x.shape[0] * x.shape[1], -1)),
    "Tensor.reshape": lambda x: x.reshape(x.size(2), -1),
    "Tensor.expand": lambda x: x[:, :1].expand(-1, 4, -1), "Tensor.expand(new)": lambda x: x.expand(2, -1, -1, -1),
    "Tensor.contiguous": lambda x: x.transpose(0, 1).contiguous(), "Tensor.clone": lambda x: x.clone() + 0,
    "getitem slices": lambda x: x[1:, ::2, -2:], "getitem int": lambda x: x[0, :, -1],
    "getitem None/Ellipsis": lambda x: x[None, ..., 1:][..., None],
    "getitem tensor": lambda x: x[torch.tensor([[0, 0], [-1, 0]])],
    "torch.gather": lambda x: torch.gather(x, 1, (x[:, :2] > 0).long()),
    "F.pad(crop)": lambda x: F.pad(x, (-1, 1, 1, -2)),
    "Tensor.size/dim": lambda x: x.new_zeros(x.size()).add(x.dim()) + x,
    "torch.arange (constant)": lambda x: x + torch.arange(x.shape[-1]),
    "torch.zeros_like": lambda x: torch.zeros_like(x) + x, "Tensor.new_ones": lambda x: x.new_ones(x.shape[-1]) * x,
    "F.dropout": lambda x: F.dropout(x, 0.3, training=False),
}


@pytest.mark.parametrize("case", MOVES)
@SETTINGS
@given(draw=st.data())
def test_data_movement(case: str, draw: st.DataObject) -> None:
    x = floats(draw, (draw.draw(st.integers(1, 5)),) + shape(draw, 2))
    # tensors whose use needs a few elements on an axis: at least 2 along each
    check(MOVES[case], [x if case not in {"getitem slices", "Tensor.split(sizes)", "getitem tensor",
                                          "torch.gather", "F.pad(crop)"} else np.pad(x, 1)], EXACT)


class BatchNorm(nn.Module):
    """F.batch_norm in eval mode with constant running statistics."""

    def __init__(self, c: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(c)
        self.register_buffer("mean", torch.rand(c, generator=g) - 0.5)
        self.register_buffer("var", torch.rand(c, generator=g) + 0.5)
        self.weight = nn.Parameter(torch.rand(c, generator=g) + 0.5)
        self.bias = nn.Parameter(torch.rand(c, generator=g))

    def forward(self, x: Any) -> Any:
        return F.batch_norm(x, self.mean, self.var, self.weight, self.bias, False, 0.1, 1e-5)


def image(d: st.DataObject, c: int | None = None) -> np.ndarray:
    n, ch, h, w = 1 + d.draw(st.integers(0, 1)), c or d.draw(st.integers(1, 5)), *shape(d, 2, 9)
    return floats(d, (n, ch, h + 2, w + 2))


def signal(d: st.DataObject, c: int) -> np.ndarray:
    """A batch of 1-D signals (N, c, L) with L of at least 5."""
    return floats(d, (1 + d.draw(st.integers(0, 1)), c, 4 + d.draw(st.integers(1, 9))))


NETWORK: dict[str, tuple[Callable[[], Callable[..., Any]], Callable[[st.DataObject], list[np.ndarray]],
                         Callable[[list[np.ndarray]], tuple[float, float]]]] = {
    "torch.conv2d": (lambda: lambda x, w: torch.conv2d(x, w, w[:, 0, 0, 0], 2, 1),
                     lambda d: [image(d, 4), floats(d, (3, 4, 3, 3))], lambda a: reduction(36)),
    "F.conv2d(groups)": (lambda: lambda x, w: F.conv2d(x, w, None, 1, "same", 1, 2),
                         lambda d: [image(d, 4), floats(d, (6, 2, 3, 3))], lambda a: reduction(18)),
    "torch.conv1d": (lambda: lambda x, w: torch.conv1d(x, w, w[:, 0, 0], 2, 1),
                     lambda d: [signal(d, 4), floats(d, (3, 4, 3))], lambda a: reduction(12)),
    "F.conv1d(same, groups, dilation)": (lambda: lambda x, w: F.conv1d(x, w, None, 1, "same", 2, 2),
                                         lambda d: [signal(d, 4), floats(d, (6, 2, 3))], lambda a: reduction(6)),
    "F.conv1d(unbatched)": (lambda: lambda x, w: F.conv1d(x[0], w, padding=(2,)),
                            lambda d: [signal(d, 3), floats(d, (2, 3, 4))], lambda a: reduction(12)),
    "F.adaptive_avg_pool1d": (lambda: lambda x: F.adaptive_avg_pool1d(x, 3), lambda d: [signal(d, 2)],
                              lambda a: reduction(a[0].shape[-1])),
    "torch._weight_norm": (lambda: lambda v, g: torch._weight_norm(v, g[:, :1, :1], 0),
                           lambda d: [floats(d, (4, 3, 5)), floats(d, (4, 3, 5))], lambda a: reduction(15)),
    "torch._weight_norm(all)": (lambda: lambda v, g: torch._weight_norm(v, g[0, 0, 0], -1),
                                lambda d: [floats(d, (4, 3, 5)), floats(d, (4, 3, 5))], lambda a: reduction(60)),
    "F.batch_norm": (lambda: BatchNorm(3), lambda d: [image(d, 3)], lambda a: TRANSCENDENTAL),
    "F.batch_norm(symbolic)": (lambda: lambda x, m, v: F.batch_norm(x, m, v.abs() + 0.5, v, m),
                               lambda d: [image(d, 3), floats(d, (3,)), floats(d, (3,))], lambda a: TRANSCENDENTAL),
    "F.layer_norm": (lambda: lambda x, w: F.layer_norm(x, x.shape[-1:], w, w * 2, 1e-6),
                     lambda d: [floats(d, shape(d, 3)), None], lambda a: reduction(a[0].shape[-1] * 8)),
    "F.embedding": (lambda: lambda w, i: F.embedding((i * 4).abs().long() % w.shape[0], w),
                    lambda d: [floats(d, shape(d, 2)), floats(d, shape(d, 2))], lambda a: EXACT),
    "F.max_pool2d": (lambda: lambda x: F.max_pool2d(x, 3, 2, 1), lambda d: [image(d)], lambda a: EXACT),
    "torch.max_pool2d": (lambda: lambda x: torch.max_pool2d(x, 2), lambda d: [image(d)], lambda a: EXACT),
    "F.avg_pool2d": (lambda: lambda x: F.avg_pool2d(x, 3, 1, 1, count_include_pad=False), lambda d: [image(d)],
                     lambda a: reduction(9)),
    "F.adaptive_avg_pool2d": (lambda: lambda x: F.adaptive_avg_pool2d(x, (2, 3)), lambda d: [image(d)],
                              lambda a: reduction(a[0].shape[-1] * a[0].shape[-2])),
    "sdpa": (lambda: F.scaled_dot_product_attention, lambda d: attention_inputs(d), lambda a: TRANSCENDENTAL),
    "sdpa(causal, scale)": (lambda: lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                                  scale=0.3),
                            lambda d: attention_inputs(d), lambda a: TRANSCENDENTAL),
    "sdpa(bool mask)": (lambda: lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=(k[..., :1, :1] < 3).transpose(-1, -2).expand(-1, -1, q.shape[-2], -1) | (k[..., 0] > 0)[
            ..., None, :]), lambda d: attention_inputs(d), lambda a: TRANSCENDENTAL),
    "sdpa(float mask)": (lambda: lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=q @ k.transpose(
        -1, -2)), lambda d: attention_inputs(d), lambda a: TRANSCENDENTAL),
}


def attention_inputs(d: st.DataObject) -> list[np.ndarray]:
    """q, k, v of shapes (b, h, sq, e), (b, h, sk, e), (b, h, sk, ev)."""
    b, h, sq, sk, e = shape(d, 5, 6)
    return [floats(d, (b, h, sq, e), -1, 1), floats(d, (b, h, sk, e), -1, 1), floats(d, (b, h, sk, 3))]


@pytest.mark.parametrize("case", NETWORK)
@SETTINGS
@given(draw=st.data())
def test_network(case: str, draw: st.DataObject) -> None:
    make, inputs, tol = NETWORK[case]
    arrays = inputs(draw)
    if arrays[-1] is None:  # a per-feature weight for the first input's last axis
        arrays[-1] = floats(draw, arrays[0].shape[-1:])
    check(make(), arrays, tol(arrays))


def modules(c: int) -> dict[str, nn.Module]:
    """A module of each type the table converts as a call_module node (symbolic_trace keeps them as modules)."""
    torch.manual_seed(c)
    bn = nn.BatchNorm2d(c).eval()
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 1.5)
    return {"nn.Linear": nn.Linear(c, 5), "nn.Conv2d": nn.Conv2d(c, 4, 3, stride=2, padding=1, bias=False),
            "nn.Conv1d": nn.Conv1d(c, 3, 3, stride=2, padding=1), "nn.AdaptiveAvgPool1d": nn.AdaptiveAvgPool1d(2),
            "nn.BatchNorm2d": bn, "nn.ReLU": nn.ReLU(inplace=True), "nn.MaxPool2d": nn.MaxPool2d(3, 2, 1),
            "nn.AdaptiveAvgPool2d": nn.AdaptiveAvgPool2d(1), "nn.LayerNorm": nn.LayerNorm(c),
            "nn.Dropout": nn.Dropout(0.5).eval(), "nn.GELU": nn.GELU(), "nn.GELU(tanh)": nn.GELU("tanh"),
            "nn.Embedding": nn.Embedding(7, c), "nn.Flatten": nn.Flatten(), "nn.Identity": nn.Identity(),
            "nn.Sigmoid": nn.Sigmoid(), "nn.Softmax": nn.Softmax(dim=1)}


MODULE_TOLERANCE = {"nn.Linear": reduction(64), "nn.Conv2d": reduction(64 * 9), "nn.Conv1d": reduction(64 * 3),
                    "nn.AdaptiveAvgPool1d": reduction(13),
                    "nn.BatchNorm2d": TRANSCENDENTAL, "nn.LayerNorm": reduction(64 * 8), "nn.Softmax": reduction(64),
                    "nn.GELU(tanh)": TRANSCENDENTAL, "nn.AdaptiveAvgPool2d": reduction(100)}


@pytest.mark.parametrize("case", list(modules(1)))
@SETTINGS
@given(draw=st.data())
def test_module(case: str, draw: st.DataObject) -> None:
    c = draw.draw(st.integers(1, 6))
    module = modules(c)[case]
    if case == "nn.Embedding":
        x = np.asarray(draw.draw(st.lists(st.integers(0, 6), min_size=1, max_size=9)), np.int64)
    elif case in ("nn.Linear", "nn.LayerNorm"):
        x = floats(draw, (*shape(draw, 2), c))
    elif case in ("nn.Conv1d", "nn.AdaptiveAvgPool1d"):
        x = signal(draw, c)
    else:
        x = image(draw, c)
    tol = MODULE_TOLERANCE.get(case, EXACT if case not in ("nn.GELU", "nn.Sigmoid") else ELEMENTWISE)
    check(nn.Sequential(module), [x], tol)


def test_parameters_become_constants_and_inputs_keep_placeholder_names() -> None:
    lin = nn.Linear(3, 2)
    gm = fx.symbolic_trace(nn.Sequential(lin))
    conversion = from_fx(gm, [torch.randn(4, 3)])
    graph = conversion.graph
    assert graph.input_names == ["input_1"] and [c.shape for c in graph.constants] == [(3, 2), (2,)]
    np.testing.assert_array_equal(graph.constants[0].numpy(), lin.weight.detach().numpy().T)


def test_outputs_that_are_inputs_constants_or_none_keep_their_place() -> None:
    class Mixed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.arange(6.0))

        def forward(self, x: Any) -> Any:
            return x, None, self.table * 2, (x + 1, 3)

    x = torch.randn(2, 2)
    out = convert_and_run(Mixed(), x.numpy())
    assert out[0] is not None and out[1] is None and out[3][1] == 3
    torch.testing.assert_close(out[0], x, rtol=0, atol=0)
    torch.testing.assert_close(out[2], torch.arange(6.0) * 2, rtol=0, atol=0)
    torch.testing.assert_close(out[3][0], x + 1, rtol=0, atol=0)


def test_unsupported_arguments_raise_naming_the_node() -> None:
    with pytest.raises(ValueError, match=r"node dropout .*training=True"):
        convert_and_run(lambda x: F.dropout(x, 0.5, training=True), np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="ceil_mode"):
        convert_and_run(lambda x: F.max_pool2d(x, 2, ceil_mode=True), np.ones((1, 1, 4, 4), np.float32))


def test_gelu_tanh_matches_torch_formula() -> None:
    x = np.linspace(-6, 6, 97, dtype=np.float32)
    got = convert_and_run(lambda t: F.gelu(t, approximate="tanh"), x)
    want = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.astype(np.float64) ** 3)))
    np.testing.assert_allclose(got.numpy(), want, rtol=TRANSCENDENTAL[0], atol=TRANSCENDENTAL[1])


INTEGER_DIVISIONS: dict[str, Callable[..., Any]] = {
    "operator.floordiv": lambda a, b: a // b, "operator.mod": lambda a, b: a % b,
    "torch.div(floor)": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "torch.div(trunc)": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "torch.remainder(scalar)": lambda a, b: torch.remainder(a, 7), "Tensor.__floordiv__(scalar)": lambda a, b: a // -3,
}


@pytest.mark.parametrize("case", INTEGER_DIVISIONS)
@SETTINGS
@given(draw=st.data())
def test_integer_division_is_exact_at_any_size(case: str, draw: st.DataObject) -> None:
    """int64 operands of any size (past 2^53 too, where a float quotient would round) and sign: torch's results."""
    n = draw.draw(st.integers(1, 9))
    big = st.integers(-(2 ** 63) + 1, 2 ** 63 - 1)
    a = np.array(draw.draw(st.lists(big, min_size=n, max_size=n)), np.int64)
    b = np.array(draw.draw(st.lists(big.filter(lambda v: v != 0) | st.sampled_from([-3, -1, 1, 2, 7]),
                                    min_size=n, max_size=n)), np.int64)
    check(INTEGER_DIVISIONS[case], [a, b], EXACT)
