"""A statement interpreter for parsed IR: runs a CPU function of a module in Python with C's semantics.

Expressions follow ``hidet_lang.ir.evaluate`` (wrap-around integers, C division, floats rounded after every
operation); this module adds what a whole function needs: variables and local arrays, loops (``range`` and
task-mapping loops through the mapping's Python-side semantics), ``if``/``while``/``break``/``continue``,
stores into numpy arrays, calls of helper functions with ``return``, and the intrinsics ``min``/``max``/``abs``
and the math functions. It is the third target of the differential tests (``hidet_lang.testing.differential``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.evaluate import convert_value, floor_div, fold, operand_type_of, round_float, wrap
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.types import DataType, TensorType, float32

__all__ = ["run_function"]


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


def _math(name: str, x: float) -> float:
    """A C math function on a double, with C's results where Python's ``math`` raises."""
    if name in ("floor", "ceil"):  # a zero result keeps the argument's sign: ceil(-0.5) is -0.0
        return math.copysign(float(getattr(math, name)(x)), x) if math.isfinite(x) else x
    if name == "sqrt":
        return math.sqrt(x) if x >= 0 else (x if x == 0 or math.isnan(x) else math.nan)
    if name == "exp":
        try:
            return math.exp(x)
        except OverflowError:
            return math.inf
    if name == "log":
        if x == 0:
            return -math.inf
        return math.log(x) if x > 0 else math.nan
    if name in ("sin", "cos"):
        return getattr(math, name)(x) if math.isfinite(x) else math.nan
    if name == "tanh":
        return math.tanh(x)
    raise NotImplementedError(f"the interpreter has no math function {name!r}")


class Interpreter:
    """Runs the functions of one parsed ``IRModule``."""

    def __init__(self, module: IRModule) -> None:
        self.functions = {f.name: f for f in module.functions}

    def call(self, name: str, args: list[Any]) -> Any:
        """Run function ``name`` with ``args`` (numpy arrays for tensors, Python scalars otherwise)."""
        f = self.functions[name]
        env: dict[E.Var, Any] = {}
        for p, a in zip(f.params, args):
            env[p] = convert_value(a, p.type) if isinstance(p.type, DataType) else a
        try:
            self.stmt(f.body, env)
        except _Return as r:
            return None if r.value is None else convert_value(r.value, f.ret_type)
        return None

    # ---------------------------------------------------------------------------------------- statements
    def stmt(self, s: S.Stmt, env: dict[E.Var, Any]) -> None:
        """Run statement ``s``."""
        if isinstance(s, S.SeqStmt):
            for c in s.stmts:
                self.stmt(c, env)
        elif isinstance(s, S.DeclareStmt):
            t = s.var.type
            if isinstance(t, TensorType):
                env[s.var] = np.zeros(tuple(int(d) for d in t.shape), t.dtype.numpy_name)
            elif s.init is not None:
                env[s.var] = convert_value(self.expr(s.init, env), t)
            else:
                env[s.var] = 0
        elif isinstance(s, S.AssignStmt):
            env[s.var] = convert_value(self.expr(s.value, env), s.var.type)
        elif isinstance(s, S.BufferStoreStmt):
            buf = self.expr(s.buf, env)
            index = tuple(int(self.expr(i, env)) for i in s.indices)
            value = convert_value(self.expr(s.value, env), E.element_type(s.buf.type))
            buf[index] = value
        elif isinstance(s, S.EvaluateStmt):
            self.expr(s.expr, env)
        elif isinstance(s, S.IfStmt):
            if self.expr(s.cond, env):
                self.stmt(s.then_body, env)
            elif s.else_body is not None:
                self.stmt(s.else_body, env)
        elif isinstance(s, S.ForStmt):
            start, stop, step = (int(self.expr(x, env)) for x in (s.start, s.stop, s.step))
            self.loop([(v,) for v in range(start, stop, step)], (s.var,), s.body, env)
        elif isinstance(s, S.ForMappingStmt):
            self.loop(s.mapping(int(self.expr(s.worker, env))), s.loop_vars, s.body, env)
        elif isinstance(s, S.WhileStmt):
            while self.expr(s.cond, env):
                try:
                    self.stmt(s.body, env)
                except _Break:
                    break
                except _Continue:
                    continue
        elif isinstance(s, S.BreakStmt):
            raise _Break
        elif isinstance(s, S.ContinueStmt):
            raise _Continue
        elif isinstance(s, S.ReturnStmt):
            raise _Return(None if s.value is None else self.expr(s.value, env))
        else:
            raise NotImplementedError(f"the interpreter has no rule for {type(s).__name__}")

    def loop(self, tasks: Any, loop_vars: tuple[E.Var, ...], body: S.Stmt, env: dict[E.Var, Any]) -> None:
        for task in tasks:
            for v, x in zip(loop_vars, task):
                env[v] = convert_value(int(x), v.type)
            try:
                self.stmt(body, env)
            except _Break:
                break
            except _Continue:
                continue

    # --------------------------------------------------------------------------------------- expressions
    def expr(self, e: E.Expr, env: dict[E.Var, Any]) -> Any:
        """The value of ``e``: C's semantics, as ``hidet_lang.ir.evaluate`` defines them."""
        if isinstance(e, E.Constant):
            return convert_value(e.value, e.dtype)
        if isinstance(e, E.Var):
            return env[e]
        if isinstance(e, E.TensorElement):
            buf = self.expr(e.base, env)
            return buf[tuple(int(self.expr(i, env)) for i in e.indices)].item()
        if isinstance(e, E.BinaryOp):
            t = operand_type_of(e)
            if e.op in E.LOGICAL_OPS:  # short-circuit, as C
                a = bool(self.expr(e.a, env))
                return (a and bool(self.expr(e.b, env))) if e.op == "&&" else (a or bool(self.expr(e.b, env)))
            a, b = self.expr(e.a, env), self.expr(e.b, env)
            if t.is_integer:
                a = wrap(int(a), t)
                b = int(b) if e.op in ("<<", ">>") else wrap(int(b), t)
            elif t.is_float:
                a, b = convert_value(a, t), convert_value(b, t)
            result = fold(e.op, a, b, t)
            return round_float(result, t) if isinstance(result, float) else result
        if isinstance(e, E.UnaryOp):
            v = self.expr(e.a, env)
            if e.op == "!":
                return not v
            t = e.type
            if e.op == "-":
                return wrap(-int(v), t) if t.is_integer else -v
            return wrap(~int(v), t)
        if isinstance(e, E.Cast):
            return convert_value(self.expr(e.expr, env), e.dtype)
        if isinstance(e, E.IfThenElse):
            return convert_value(self.expr(e.then_expr if self.expr(e.cond, env) else e.else_expr, env), e.type)
        if isinstance(e, E.Call):
            return self.call(e.func_name, [self.expr(a, env) for a in e.args])
        if isinstance(e, E.Intrinsic):
            return self.intrinsic(e, env)
        raise NotImplementedError(f"the interpreter has no rule for {type(e).__name__}")

    def intrinsic(self, e: E.Intrinsic, env: dict[E.Var, Any]) -> Any:
        t = e.ret_type
        assert isinstance(t, DataType)
        args = [convert_value(self.expr(a, env), t) for a in e.args]
        if e.name == "min":  # the C helpers: `a < b ? a : b` (NaN and -0.0 give b)
            return args[0] if args[0] < args[1] else args[1]
        if e.name == "max":
            return args[0] if args[0] > args[1] else args[1]
        if e.name == "abs":
            return abs(args[0]) if t.is_float else wrap(-args[0] if args[0] < 0 else args[0], t)
        if e.name == "floordiv":  # the C helper computes half precision in float
            step = float32 if t.nbytes <= 4 else t
            return round_float(floor_div(args[0], args[1], lambda v: round_float(v, step)), t)
        return round_float(_math(e.name, float(args[0])), t)


def run_function(module: IRModule, name: str, *args: Any) -> Any:
    """Run function ``name`` of the parsed ``module`` in Python on ``args`` (numpy arrays are updated in place)."""
    return Interpreter(module).call(name, list(args))
