"""Spans of what the parser builds: every IR expression and statement carries the line and column of the Python
expression or statement it was parsed from, through the parser's visit shell; a loop's errors point at its
iterable."""

from __future__ import annotations

import inspect

import pytest

import hidet_lang as hidet
from hidet_lang import f32, grid, i32
from hidet_lang.cuda import threadIdx
from hidet_lang.errors import DSLTypeError
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.functor import collect
from hidet_lang.ir.mapping import spatial
from hidet_lang.ir.span import Span


def _position(func: object, text: str) -> tuple[int, int]:
    """The absolute line and 0-based column of the first occurrence of `text` in the source of `func`."""
    lines, first = inspect.getsourcelines(func)
    k = next(k for k, line in enumerate(lines) if text in line)
    return first + k, lines[k].index(text)


def _at(span: Span | None) -> tuple[int, int]:
    assert span is not None
    return span.line, span.col


def test_an_expression_carries_the_span_of_its_column() -> None:
    @hidet.script
    def k(a: f32[8], b: f32[8], c: f32[8], j: i32):
        for i in range(8):
            c[i] = a[i] + b[j]

    store = collect(k.ir.body, S.BufferStoreStmt)[0]
    add = store.value
    assert isinstance(add, E.BinaryOp) and add.op == "+"
    assert _at(add.span) == _position(k.py_func, "a[i] + b[j]")
    assert isinstance(add.a, E.TensorElement) and _at(add.a.span) == _position(k.py_func, "a[i]")
    assert isinstance(add.b, E.TensorElement) and _at(add.b.span) == _position(k.py_func, "b[j]")
    assert _at(store.span) == _position(k.py_func, "c[i] =")


def test_nested_expressions_carry_their_own_columns() -> None:
    @hidet.script
    def k(a: f32[8], b: f32[8], c: i32[8]):
        b[0] = (a[1] * 2.0) - a[2]
        c[0] = i32(a[3]) * 3

    first, second = (s.value for s in collect(k.ir.body, S.BufferStoreStmt))
    assert isinstance(first, E.BinaryOp) and first.op == "-"
    assert _at(first.span) == _position(k.py_func, "(a[1] * 2.0) - a[2]")
    assert _at(first.a.span) == _position(k.py_func, "a[1] * 2.0")
    assert _at(first.b.span) == _position(k.py_func, "a[2]")
    assert isinstance(second, E.BinaryOp) and isinstance(second.a, E.Cast)
    assert _at(second.a.span) == _position(k.py_func, "i32(a[3])")
    assert _at(second.a.expr.span) == _position(k.py_func, "a[3])")


def test_every_loop_construct_builds_its_statements_at_the_for_line() -> None:
    m = spatial(4)

    @hidet.script
    def k(a: f32[4, 4], n: i32):
        for i in range(n):  # RANGE
            a[0, i] = 1.0
        for p, q in grid(4, 4):  # GRID
            a[p, q] = 2.0
        for t in m.on(threadIdx.x):  # MAPPING
            a[t, 0] = 3.0

    fors = collect(k.ir.body, S.ForStmt)
    lines = [_position(k.py_func, marker)[0] for marker in ("# RANGE", "# GRID", "# GRID")]
    assert [s.span.line for s in fors] == lines
    (mapping_loop,) = collect(k.ir.body, S.ForMappingStmt)
    assert _at(mapping_loop.span) == _position(k.py_func, "for t in m.on")


def test_looping_over_an_ir_value_is_an_error_at_the_iterable() -> None:
    def define() -> None:
        @hidet.script
        def k(a: f32[4]):
            for x in a[0]:
                a[1] = x

    with pytest.raises(DSLTypeError, match=r"cannot loop over a value of type f32; use range\(\.\.\.\)") as e:
        define()
    assert _at(e.value.span) == _position(define, "a[0]:")


def test_looping_over_a_task_mapping_names_the_worker_form() -> None:
    m = spatial(4)

    def define() -> None:
        @hidet.script
        def k(a: f32[4]):
            for x in m:
                a[x] = 1.0

    with pytest.raises(DSLTypeError, match=r"through a worker: `for i, j in m\.on\(worker\)`") as e:
        define()
    assert _at(e.value.span) == _position(define, "m:")
