"""The IR's generic rewriter, printer, verifier and node equality."""

from __future__ import annotations

import dataclasses

import pytest

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32, spatial
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.functor import IRRewriter, collect, substitute
from hidet_lang.ir.types import float32, int32
from hidet_lang.ir.verify import IRVerificationError, verify
from hidet_lang.passes.pipeline import STEPS, lower


def test_var_equality_is_identity_and_other_nodes_are_structural() -> None:
    a, b = E.Var("a", int32), E.Var("a", int32)
    assert a != b and a == a
    assert E.BinaryOp("+", a, E.Constant(1, int32)) == E.BinaryOp("+", a, E.Constant(1, int32))
    assert E.BinaryOp("+", a, E.Constant(1, int32)) != E.BinaryOp("+", b, E.Constant(1, int32))


def test_expr_has_no_truth_value() -> None:
    with pytest.raises(TypeError, match="no truth value"):
        bool(E.Var("a", int32) < 3)


def test_rewriter_rebuilds_only_what_changed() -> None:
    x, y = E.Var("x", int32), E.Var("y", int32)
    left = E.BinaryOp("*", x, x)
    tree = E.BinaryOp("+", left, y)

    class RenameY(IRRewriter):
        def visit_Var(self, v: E.Var) -> E.Expr:
            return x if v is y else v

    out = RenameY().visit(tree)
    assert out == E.BinaryOp("+", left, x)
    assert out.a is left  # the unchanged subtree is shared, not copied
    assert IRRewriter().visit(tree) is tree


def test_substitute_and_collect() -> None:
    x = E.Var("x", float32)
    store = S.BufferStoreStmt(E.Var("buf", f32[4]), (E.Constant(0, int32),), E.BinaryOp("*", x, x))
    replaced = substitute(store, {x: E.Constant(2.0, float32)})
    assert collect(replaced, E.Var) == [store.buf]
    assert len(collect(store, E.Var)) == 3


def test_printer_shows_dsl_like_text() -> None:
    with hidet.script_module():

        @hidet.script
        def kernel(a: f32[8], n: i32):
            attrs.func_kind = "public"
            for i in range(n):
                if i % 2 == 0:
                    a[i] = a[i] * 2.0

    text = str(kernel.ir)
    assert "def kernel(a: f32[8], n: i32) -> void:  # public" in text
    assert "for i in range(0, n, 1):" in text
    assert "if i % 2 == 0:" in text
    assert "a[i] = a[i] * 2.0" in text


with hidet.script_module():

    @hidet.script
    def fill_loop(a: f32[8]):
        attrs.func_kind = "public"
        for i in range(8):
            a[i] = 1.0


def _fill_loop() -> S.ForStmt:
    loop = fill_loop.ir.body
    assert isinstance(loop, S.ForStmt) and loop.kind is S.LoopKind.PLAIN
    verify(fill_loop.ir)
    return loop


def test_verifier_rejects_a_variable_used_outside_its_scope() -> None:
    loop = _fill_loop()
    store = S.BufferStoreStmt(fill_loop.ir.params[0], (loop.var,), E.Constant(0.0, float32), span=loop.span)
    broken_body = S.seq([loop, store])
    with pytest.raises(IRVerificationError, match="outside the scope"):
        verify(dataclasses.replace(fill_loop.ir, body=broken_body))


def test_verifier_requires_a_span_on_every_statement_of_parsed_code() -> None:
    loop = _fill_loop()
    spanless = S.BufferStoreStmt(fill_loop.ir.params[0], (E.Constant(0, int32),), E.Constant(0.0, float32))
    assert spanless.span is None
    with pytest.raises(IRVerificationError, match="has no span: a\\[0\\] = 0.0"):
        verify(dataclasses.replace(fill_loop.ir, body=S.seq([loop, spanless])))
    # IR built by hand, not parsed from a user's source, needs no spans
    verify(dataclasses.replace(fill_loop.ir, body=S.seq([loop, spanless]), span=None))


def test_verifier_refuses_values_that_are_not_members_of_the_enums() -> None:
    loop = _fill_loop()
    with pytest.raises(IRVerificationError, match="not a LoopKind"):
        verify(dataclasses.replace(fill_loop.ir, body=dataclasses.replace(loop, kind="unrolled")))
    decl = S.DeclareStmt(loop.var, None, loop.span, span=loop.span)  # a span passed where the scope goes
    with pytest.raises(IRVerificationError, match="not a DeclScope"):
        verify(dataclasses.replace(fill_loop.ir, body=S.seq([decl])))
    with pytest.raises(IRVerificationError, match="not a FuncKind"):
        verify(dataclasses.replace(fill_loop.ir, attrs=dataclasses.replace(fill_loop.ir.attrs, kind="kernel")))


def test_verifier_checks_the_stage_invariants_through_the_pipeline() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def kernel(a: f32[4, 8]):
            attrs.func_kind = "public"
            for w in range(32):
                for i, j in spatial(4, 8).on(w):
                    a[i, j] = 1.0

    with pytest.raises(IRVerificationError, match="task-mapping loop"):
        verify(module.ir_module(), "mappings_lowered")
    lowered = lower(module.ir_module(), verify_ir=True)
    verify(lowered, "flattened")


def test_dump_ir_writes_every_step(tmp_path, monkeypatch) -> None:
    with hidet.script_module() as module:

        @hidet.script
        def dumped(a: f32[4]):
            attrs.func_kind = "public"
            for i in range(4):
                a[i] = 0.0

    monkeypatch.setenv("HIDET_LANG_DUMP_IR", str(tmp_path))
    lower(module.ir_module())
    files = sorted(p.name for p in (tmp_path / "dumped").iterdir())
    assert files == [f"{n:02d}_{name}.txt" for n, name in enumerate(["parsed", *(step[0] for step in STEPS)])]
    assert files[-1] == f"{len(STEPS):02d}_simplify.txt"
    assert "def dumped" in (tmp_path / "dumped" / files[-1]).read_text()
