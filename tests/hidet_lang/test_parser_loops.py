"""Loop constructs: each iterable kind builds its own loop, new kinds need no parser change, and what cannot be
looped over is an error naming what can."""

from __future__ import annotations

import ast
import re
from collections import namedtuple
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import hidet_lang as hidet
from hidet_lang import attrs, f32, grid, i32, meta
from hidet_lang.errors import DSLSyntaxError
from hidet_lang.frontend.loops import (
    GridLoop,
    LoopBuilder,
    LoopConstruct,
    MappingLoop,
    RangeLoop,
    UnrolledLoop,
    loop_construct,
    register_loop_construct,
)
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.functor import collect
from hidet_lang.ir.loop_attrs import LoopAttr
from hidet_lang.ir.mapping import spatial
from hidet_lang.ir.stmt import LoopKind
from hidet_lang.ir.types import int32

Pair = namedtuple("Pair", "first second")


@pytest.mark.parametrize(("value", "construct"), [
    (range(2, 8, 3), RangeLoop(2, 8, 3)),
    (grid(4, 2, attrs="u."), GridLoop((4, 2), (LoopAttr(LoopKind.UNROLL), LoopAttr(LoopKind.PLAIN)))),
    (meta.range(3), UnrolledLoop((0, 1, 2))),
    (meta.each(["x", "y"]), UnrolledLoop(("x", "y"))),
    ((1, 2), UnrolledLoop((1, 2))),
    ([1, 2], UnrolledLoop((1, 2))),
    (Pair(1, 2), UnrolledLoop((1, 2))),
])
def test_each_iterable_kind_stands_for_its_construct(value: Any, construct: LoopConstruct) -> None:
    assert loop_construct(value) == construct


def test_a_mapping_bound_to_a_worker_is_a_mapping_loop() -> None:
    on = spatial(4, 8).on(3)
    assert loop_construct(on) == MappingLoop(on)


@pytest.mark.parametrize(("value", "message"), [
    (3.5, "cannot loop over the Python float 3.5; use range(...), grid(...), mapping.on(worker) or meta.range(...)"),
    (spatial(4), "iterate over a task mapping through a worker"),
])
def test_what_is_not_a_loop_is_refused_with_what_can_be_looped_over(value: Any, message: str) -> None:
    with pytest.raises(TypeError, match=re.escape(message)):
        loop_construct(value)


def test_break_leaves_run_time_loops_only() -> None:
    def define() -> None:
        @hidet.script
        def k(a: f32[4]):
            for i in (0, 1):
                if a[i] > 0.0:
                    break

    with pytest.raises(DSLSyntaxError, match="cannot leave a loop unrolled while parsing"):
        define()


def test_a_tuple_loop_is_unrolled_with_python_values() -> None:
    @hidet.script
    def k(a: f32[8]):
        for i, scale in ((0, 1.0), (3, 2.0)):
            a[i] = a[i] * scale

    stores = collect(k.ir.body, S.BufferStoreStmt)
    assert [s.indices for s in stores] == [(E.Constant(0, int32),), (E.Constant(3, int32),)]
    assert not collect(k.ir.body, S.ForStmt)


@dataclass(frozen=True)
class _Countdown(LoopConstruct):
    """A loop kind the parser does not know: `n - 1` down to 0."""

    n: Any

    def build(self, parser: LoopBuilder, node: ast.For, names: list[str]) -> S.Stmt:
        """One run-time loop whose variable counts down."""
        stop = parser.host_call(node.iter, E.convert, self.n)
        up = E.Var(parser.fresh_name("up"), int32)
        body = parser.loop_body(node.body, {names[0]: E.binary("-", E.binary("-", stop, 1), up)})
        return S.ForStmt(up, E.Constant(0, int32), stop, E.Constant(1, int32), body)


def countdown(n: Any) -> _Countdown:
    """What a kernel iterates over: `for i in countdown(n)`."""
    return _Countdown(n)


class _Evens:
    """A host value the frontend adapts through the registry: the even numbers below `n`."""

    def __init__(self, n: Any) -> None:
        self.n = n


register_loop_construct(_Evens, lambda evens: RangeLoop(0, evens.n, 2))


def test_a_new_loop_kind_needs_no_parser_change() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def k(n: i32, a: i32[16], b: i32[16]):
            attrs.func_kind = "public"
            for i in countdown(n):
                a[i] = n - i
            for j in _Evens(n):
                b[j] = j + 100

    a = np.zeros(16, np.int32)
    b = np.zeros(16, np.int32)
    module.build()(10, a, b)
    assert a.tolist() == [10 - i for i in range(10)] + [0] * 6
    assert b.tolist() == [j + 100 if j < 10 and j % 2 == 0 else 0 for j in range(16)]
