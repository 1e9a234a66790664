"""`fuse`: post-scheduling fusion, the injection of prologues and epilogues into a scheduled kernel.

The anchor is an IR module that follows the kernel contract (one kernel; size parameters, inputs, outputs). The
rewrite replaces every element read of an input that has a prologue by the prologue's value at that index, every
element store to an output that has an epilogue by the epilogue's stores, and every `cp_async` from an input with
a prologue by synchronous element copies of the prologue's values (the commit/wait calls around it stay, and
are harmless); a vector copy from such an input loads the prologue's own inputs as vectors where it can, and one
to an output with an epilogue becomes element stores (see `_Injector.vector_load`); the kernel's parameters become
the fused ones. The fused kernel computes what the prologues, the
anchor and the epilogues compute one after another. A kernel that breaks the fusion contract for a tensor that
receives a prologue or an epilogue raises `FusionContractError`; fusing nothing returns the anchor itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from itertools import count

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import Function, IRModule
from hidet_lang.ir.functor import IRRewriter, substitute
from hidet_lang.ir.intrinsics import ADDRESS_ALIGNED, CP_ASYNC_COPIES, VECTOR_COPIES
from hidet_lang.ir.node import at
from hidet_lang.ir.types import DataType, TensorType, element_type, int32
from stdlib_ops.fusion.contract import check_fusion_contract, the_kernel
from stdlib_ops.fusion.signature import FusedSignature, fused_signature
from stdlib_ops.fusion.spec import Epilogue, Prologue
from stdlib_ops.schedule.cuda_vectors import aligned_test, contiguous_reads, lane_value, vector_copy


def fuse(anchor: IRModule, prologues: Mapping[str, Prologue] | None = None,
         epilogues: Mapping[str, Epilogue] | None = None, *, name: str | None = None) -> IRModule:
    """`anchor` with `prologues` (by the name of the kernel input each replaces) and `epilogues` (by the name of
    the kernel output each replaces) injected into its kernel, renamed `name` when given.

    The fused kernel's parameters follow the kernel contract: the size parameters, in order of first appearance
    in the shapes of the inputs then the outputs (a size parameter of the anchor that no shape names follows
    them), then the inputs (the anchor's, each one with a prologue replaced in place by the prologue's inputs,
    then the epilogues' extra inputs), then the outputs (the anchor's, each one with an epilogue replaced by the
    epilogue's outputs); a tensor named twice is one parameter. Raises FusionContractError when the kernel uses a
    fused input or output other than by element accesses (or a cp_async source), and ValueError for a name that
    is no tensor parameter of the kernel or two parameters of one name."""
    prologues, epilogues = dict(prologues or {}), dict(epilogues or {})
    if not prologues and not epilogues:
        return anchor
    kernel = the_kernel(anchor)
    params = {p.name: p for p in kernel.params}
    fused_inputs = {_tensor_param(params, key, kernel, "prologue"): p for key, p in prologues.items()}
    fused_outputs = {_tensor_param(params, key, kernel, "epilogue"): e for key, e in epilogues.items()}
    check_fusion_contract(kernel, fused_inputs, fused_outputs)
    signature = fused_signature(kernel, fused_inputs, fused_outputs)
    body = _Injector(fused_inputs, fused_outputs, signature).visit(kernel.body)
    fused = dataclasses.replace(kernel, name=name or kernel.name, params=signature.params, body=body)
    return IRModule(tuple(fused if f is kernel else f for f in anchor.functions))


def _tensor_param(params: Mapping[str, E.Var], key: str, kernel: Function, what: str) -> E.Var:
    param = params.get(key)
    if param is None or not isinstance(param.type, TensorType):
        tensors = ", ".join(p.name for p in params.values() if isinstance(p.type, TensorType))
        raise ValueError(f"a {what} for '{key}', which is no tensor parameter of kernel '{kernel.name}' "
                         f"(its tensor parameters: {tensors})")
    return param


class _Injector(IRRewriter):
    """Replaces reads of anchor inputs, stores to anchor outputs, cp_async copies from anchor inputs and vector
    accesses of both."""

    def __init__(self, prologues: dict[E.Var, Prologue], epilogues: dict[E.Var, Epilogue],
                 signature: FusedSignature) -> None:
        super().__init__()
        self.prologues, self.epilogues = prologues, epilogues
        self.renames = signature.renames
        self.temporaries = count()
        # (anchor input, lanes) -> its prologue's value over placeholder indices and the reads that load as vectors
        self.vector_reads: dict[tuple[E.Var, int], tuple[tuple[E.Var, ...], E.Expr, tuple[E.TensorElement, ...]]] = {}

    def bind(self, e: E.Expr) -> E.Expr:
        """`e`, made by a description, with its variables renamed to the fused kernel's parameters."""
        return substitute(e, self.renames) if self.renames else e

    def input_value(self, tensor: E.Var, indices: tuple[E.Expr, ...]) -> E.Expr:
        """The prologue's value of anchor input `tensor` at `indices`, in the input's data type."""
        value = self.bind(E.convert(self.prologues[tensor].value(indices)))
        return _converted(value, element_type(tensor.type))

    def visit_TensorElement(self, e: E.TensorElement) -> E.Expr:
        if not (isinstance(e.base, E.Var) and e.base in self.prologues):
            return self.rebuild(e)
        with at(e.span):
            return self.input_value(e.base, self.visit(e.indices))

    def visit_BufferStoreStmt(self, s: S.BufferStoreStmt) -> S.Stmt:
        if not (isinstance(s.buf, E.Var) and s.buf in self.epilogues):
            return self.rebuild(s)
        indices, value = self.visit(s.indices), self.visit(s.value)
        with at(s.span):
            value = _converted(value, element_type(s.buf.type))
            prelude: list[S.Stmt] = []
            if not isinstance(value, (E.Var, E.Constant)):
                temporary = E.Var(f"{s.buf.name}_value{next(self.temporaries)}", value.type)
                prelude.append(S.DeclareStmt(temporary, value))
                value = temporary
            stores = [
                S.BufferStoreStmt(self.bind(st.tensor), tuple(self.bind(E.convert(i)) for i in st.indices),
                                  _converted(self.bind(E.convert(st.value)), element_type(st.tensor.type)))
                for st in self.epilogues[s.buf].stores(indices, value)
            ]
            return S.seq(prelude + stores) if prelude or stores else S.SeqStmt(())

    def visit_EvaluateStmt(self, s: S.EvaluateStmt) -> S.Stmt:
        e = s.expr
        if isinstance(e, E.Intrinsic) and e.name in VECTOR_COPIES and self.fused_element(e.args[0], self.epilogues):
            return self.vector_store(s, e)
        copied = CP_ASYNC_COPIES.get(e.name) or VECTOR_COPIES.get(e.name) if isinstance(e, E.Intrinsic) else None
        if not (copied and self.copies_from_prologue(e)):
            return self.rebuild(s)
        if e.name in VECTOR_COPIES:
            return self.vector_load(s, e)
        dst = self.visit(e.args[0])
        src = e.args[1].expr
        indices = self.visit(src.indices)
        dtype = element_type(src.base.type)
        count_ = copied // dtype.nbytes
        with at(s.span):
            copies = [
                S.BufferStoreStmt(dst, (E.convert(k),),
                                  self.input_value(src.base, (*indices[:-1], _plus(indices[-1], k))))
                for k in range(count_)
            ]
            return S.seq(copies)

    # ---- vector accesses (see `hidet_lang.ir.intrinsics.VECTOR_COPIES`): a vector load from an input with a
    # prologue loads the prologue's inputs read along the innermost index as vectors of the same lanes (where
    # their rows are whole vectors) and computes the lanes from them, its other reads element by element; a vector
    # store to an output with an epilogue is element stores. The alignment test of an input with a prologue tests
    # the inputs loaded as vectors in its place (1 where there are none), that of an output with an epilogue is 1.

    def prologue_vectors(self, tensor: E.Var, lanes: int) -> tuple[tuple[E.Var, ...], E.Expr,
                                                                  tuple[E.TensorElement, ...]]:
        """The prologue's value of anchor input `tensor` at placeholder indices, and its reads that load as vectors
        of `lanes` along the innermost one (none unless the anchor input's own rows are whole vectors, which keeps
        the innermost index of an aligned vector copy from it at a multiple of `lanes`)."""
        key = (tensor, lanes)
        if key not in self.vector_reads:
            shape = tensor.type.shape
            places = tuple(E.Var(f"{tensor.name}_at{k}", int32) for k in range(len(shape)))
            value = self.input_value(tensor, places)
            whole = isinstance(shape[-1], int) and shape[-1] % lanes == 0
            self.vector_reads[key] = (places, value, contiguous_reads(value, places[-1], lanes) if whole else ())
        return self.vector_reads[key]

    def vector_load(self, s: S.EvaluateStmt, e: E.Intrinsic) -> S.Stmt:
        """The vector load `e` from an anchor input with a prologue: the prologue's lanes, from vector loads of
        its inputs where they are read along the innermost index."""
        dst, src = self.visit(e.args[0]), e.args[1].expr
        indices = self.visit(src.indices)
        lanes = VECTOR_COPIES[e.name] // element_type(src.base.type).nbytes
        places, value, reads = self.prologue_vectors(src.base, lanes)
        with at(s.span):
            registers = {r: E.Var(f"{r.base.name}_vector{next(self.temporaries)}",
                                  TensorType(element_type(r.base.type), (lanes,))) for r in reads}
            loads: list[S.Stmt] = []
            for r, reg in registers.items():
                loads += [S.DeclareStmt(reg),
                          vector_copy(E.Address(E.TensorElement(reg, (E.convert(0),))),
                                      E.Address(substitute(r, dict(zip(places, indices)))),
                                      lanes * element_type(reg.type).nbytes)]
            lane_values = [S.BufferStoreStmt(dst, (E.convert(k),), lane_value(value, places, indices, registers, k))
                           for k in range(lanes)]
            return S.seq(loads + lane_values)

    def fused_element(self, e: E.Expr, fused: dict) -> bool:
        """Whether `e` is `~t[...]` of a tensor `t` in `fused` (the prologues or the epilogues)."""
        return (isinstance(e, E.Address) and isinstance(e.expr, E.TensorElement)
                and isinstance(e.expr.base, E.Var) and e.expr.base in fused)

    def vector_store(self, s: S.EvaluateStmt, e: E.Intrinsic) -> S.Stmt:
        """The element stores, through its epilogue, of the vector store `e` to an anchor output."""
        dst, src = e.args[0].expr, self.visit(e.args[1])
        lanes = VECTOR_COPIES[e.name] // element_type(dst.base.type).nbytes
        with at(s.span):
            stores = [S.BufferStoreStmt(dst.base, (*dst.indices[:-1], _plus(dst.indices[-1], k)),
                                        E.TensorElement(src, (E.convert(k),))) for k in range(lanes)]
        return S.seq([self.visit_BufferStoreStmt(store) for store in stores])

    def visit_Intrinsic(self, e: E.Intrinsic) -> E.Expr:
        if e.name == ADDRESS_ALIGNED and self.fused_element(e.args[0], self.epilogues):
            return E.Constant(1, e.type)
        if not (e.name == ADDRESS_ALIGNED and self.fused_element(e.args[0], self.prologues)):
            return self.rebuild(e)
        tensor, width = e.args[0].expr.base, e.args[1]
        nbytes = element_type(tensor.type).nbytes
        if not (isinstance(width, E.Constant) and width.value % nbytes == 0):
            return E.Constant(1, e.type)
        lanes = width.value // nbytes
        tested = dict.fromkeys(r.base for r in self.prologue_vectors(tensor, lanes)[2])
        aligned: E.Expr | None = None
        for base in tested:
            test = aligned_test(base, lanes * element_type(base.type).nbytes)
            aligned = test if aligned is None else E.BinaryOp("&&", aligned, test)
        if aligned is None:
            return E.Constant(1, e.type)
        return E.IfThenElse(aligned, E.Constant(1, e.type), E.Constant(0, e.type))

    def copies_from_prologue(self, e: E.Intrinsic) -> bool:
        src = e.args[1]
        return (isinstance(src, E.Address) and isinstance(src.expr, E.TensorElement)
                and isinstance(src.expr.base, E.Var) and src.expr.base in self.prologues)


def _plus(index: E.Expr, k: int) -> E.Expr:
    return index if k == 0 else E.binary("+", index, k)


def _converted(value: E.Expr, dtype: DataType) -> E.Expr:
    return value if value.type == dtype else E.Cast(value, dtype)


__all__: Sequence[str] = ["fuse"]
