"""Random chains of elementwise operations, as hypothesis draws them, turned into prologues and epilogues (IR)
and evaluated by numpy (the unfused reference)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from hidet_lang.ir import expr as E
from hidet_lang.ir.types import TensorType, float16, float32, int32
from stdlib_ops.fusion import Epilogue, Prologue, Store

QUARTERS = tuple(q / 4 for q in range(-8, 9))  # constants and data: exact in f32 and f16, so are their products
TRANSCENDENTAL = frozenset({"tanh", "exp", "f16"})


@dataclass(frozen=True)
class Op:
    """One elementwise operation: `kind` with a constant, or with a tensor operand broadcast as `broadcast` says
    ('full': the value's shape, 'row': the last dimension, 'col': the first dimension with the rest of size 1)."""

    kind: str
    constant: float = 0.0
    broadcast: str = ""


def ops(allow_exp: bool) -> st.SearchStrategy[Op]:
    """One operation; `exp` only where asked (after the anchor, where its argument stays moderate)."""
    unary = ["relu", "neg", "tanh"] + (["exp"] if allow_exp else [])
    return st.one_of(
        st.builds(Op, st.sampled_from(["add", "mul"]), st.sampled_from(QUARTERS)),
        st.builds(Op, st.sampled_from(["add_tensor", "mul_tensor"]), broadcast=st.sampled_from(["full", "row", "col"])),
        st.builds(Op, st.sampled_from(unary)),
    )


def chains(allow_exp: bool = False, max_size: int = 3) -> st.SearchStrategy[tuple[Op, ...]]:
    """A chain of operations, possibly empty; a round trip through f16 may end it."""
    body = st.lists(ops(allow_exp), max_size=max_size).map(tuple)
    return st.tuples(body, st.booleans()).map(lambda t: t[0] + ((Op("f16"),) if t[1] else ()))


def rtol(*chain_list: Sequence[Op]) -> float:
    """The relative tolerance of a fused result against the unfused one for these chains.

    Without tanh, exp or an f16 rounding of their results, the fused kernel computes what the unfused one does,
    except that the C compiler may contract `a * b + c` into one rounding: a few f32 ulps. tanh and exp come from
    the C library (or CUDA's) and may differ from numpy's in the last ulp or two; the anchor sums such differences
    over at most 40 products of values below 8 and exp turns an absolute error into a relative one, which stays
    below 1e-4; a round trip through f16 of two values a few f32 ulps apart may round them to neighbouring halves,
    2^-10 apart, so it stands for 1e-3."""
    kinds = {op.kind for chain in chain_list for op in chain}
    if "f16" in kinds and kinds & {"tanh", "exp"}:
        return 2e-3
    return 2e-4 if kinds & TRANSCENDENTAL else 1e-6


@dataclass
class ChainTensors:
    """The tensor operands of a chain applied to a tensor of dimension names `dims`: their IR parameters (with
    size variables of their own, which fusion matches by name) and their numpy data."""

    chain: tuple[Op, ...]
    params: list[E.Var]

    @staticmethod
    def make(chain: tuple[Op, ...], dims: tuple[str, ...], prefix: str) -> ChainTensors:
        """Parameters named `<prefix>_w<i>` for the tensor operands of `chain`."""
        sizes = {d: E.Var(d, int32) for d in dims}
        params = [
            E.Var(f"{prefix}_w{i}", TensorType(float32, _operand_shape(op.broadcast, tuple(sizes[d] for d in dims))))
            for i, op in enumerate(chain) if op.kind.endswith("_tensor")
        ]
        return ChainTensors(chain, params)

    def ir(self, value: E.Expr, indices: tuple[E.Expr, ...]) -> E.Expr:
        """The chain applied to the IR value `value` at `indices`."""
        operands = iter(self.params)
        for op in self.chain:
            if op.kind.endswith("_tensor"):
                w = next(operands)
                operand = E.TensorElement(w, _operand_indices(op.broadcast, indices))
                value = value + operand if op.kind == "add_tensor" else value * operand
            else:
                value = _unary_ir(op, value)
        return value

    def numpy(self, value: np.ndarray, data: Sequence[np.ndarray]) -> np.ndarray:
        """The chain applied to the array `value`, with `data` for the tensor operands (float32 throughout)."""
        operands = iter(data)
        for op in self.chain:
            if op.kind == "add_tensor":
                value = value + next(operands)
            elif op.kind == "mul_tensor":
                value = value * next(operands)
            else:
                value = _unary_numpy(op, value)
        return value.astype(np.float32)

    def shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The concrete shapes of the tensor operands for a value of `shape`."""
        return [_operand_shape(op.broadcast, shape) for op in self.chain if op.kind.endswith("_tensor")]


def prologue(chain: ChainTensors, source: E.Var) -> Prologue:
    """A prologue that applies `chain` to the elements of `source`."""
    return Prologue((source, *chain.params), lambda idx: chain.ir(E.TensorElement(source, idx), idx))


def epilogue(chain: ChainTensors, out: E.Var) -> Epilogue:
    """An epilogue that stores `chain` of the anchor's value into `out` at the same index."""
    return Epilogue((out,), lambda idx, v: [Store(out, idx, chain.ir(v, idx))], inputs=tuple(chain.params))


def tensor_param(name: str, dims: tuple[str, ...]) -> E.Var:
    """An f32 tensor parameter with fresh size variables named `dims`."""
    return E.Var(name, TensorType(float32, tuple(E.Var(d, int32) for d in dims)))


def _operand_shape(broadcast: str, shape: tuple) -> tuple:
    if broadcast == "full":
        return tuple(shape)
    if broadcast == "row" or len(shape) == 1:
        return (shape[-1],)
    return (shape[0], *(1 for _ in shape[1:]))


def _operand_indices(broadcast: str, indices: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
    if broadcast == "full":
        return indices
    if broadcast == "row" or len(indices) == 1:
        return (indices[-1],)
    return (indices[0], *(E.convert(0) for _ in indices[1:]))


def _unary_ir(op: Op, v: E.Expr) -> E.Expr:
    if op.kind == "add":
        return v + E.Constant(op.constant, float32)
    if op.kind == "mul":
        return v * E.Constant(op.constant, float32)
    if op.kind == "relu":
        return E.Intrinsic("max", (v, E.Constant(0.0, float32)), float32)
    if op.kind == "neg":
        return -v
    if op.kind == "f16":
        return E.Cast(E.Cast(v, float16), float32)
    return E.Intrinsic(op.kind, (v,), float32)  # tanh, exp


def _unary_numpy(op: Op, v: np.ndarray) -> np.ndarray:
    f32 = np.float32
    table = {
        "add": lambda: v + f32(op.constant), "mul": lambda: v * f32(op.constant), "relu": lambda: np.maximum(v, f32(0)),
        "neg": lambda: -v, "tanh": lambda: np.tanh(v), "exp": lambda: np.exp(v),
        "f16": lambda: v.astype(np.float16).astype(np.float32),
    }
    with np.errstate(over="ignore", invalid="ignore"):
        return table[op.kind]().astype(np.float32)
