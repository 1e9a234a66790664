"""Python AST -> IR: the `Parser` of one `@hidet.script` function, `Parser(...).parse_function(fdef)`.

The parser is one class assembled from mixins, one concern each, over `ParserCore` (core.py: the state of the
translation, the visit shell that dispatches each AST node to its `visit_<Node>`/`expr_<Node>` method inside an
`at(span)` block, scopes, blocks, errors):

- statements.py: control flow (`if`, `while`, `for`, `break`, `continue`, `return`, `assert`);
- assignments.py: assignments, declarations, `+=`, stores, `attrs`;
- expressions.py: names, attributes, indexing, lambdas, comprehensions, type annotations;
- operators.py: arithmetic, comparisons and logic on host and IR values;
- calls.py: calls of script functions, casts, math functions, `range`, Python helpers;
- loops.py: the loop constructs `for` iterates over.

Values are of two kinds. Host values (Python ints, floats, tuples, task mappings, helper functions, other
script functions, data types) are evaluated while parsing; IR values become IR. A `for` loop dispatches on
what its iterable evaluates to: each iterable kind is a `LoopConstruct` that builds its own loop statement, so
new loop kinds need no parser change.

A function without a return annotation returns the promotion of the types of its `return` values (`return 1`
and `return x` with `x: f32` give f32). A function may call itself by name (`check_kind_rules` allows it in
`cpu_internal` functions only); its return type must then be annotated (`-> i32`, or `-> None`).
"""

from __future__ import annotations

import ast
import dataclasses

from hidet_lang.errors import DSLSyntaxError, DSLTypeError
from hidet_lang.frontend import semantics
from hidet_lang.frontend.assignments import AssignmentParser
from hidet_lang.frontend.builtins import ParamTypes
from hidet_lang.frontend.calls import CallParser, RecursiveSelf
from hidet_lang.frontend.core import FunctionContext
from hidet_lang.frontend.statements import StatementParser
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import HOST_CALLABLE_KINDS, CudaAttrs, FuncAttrs, FuncKind, Function, returnable_to_python
from hidet_lang.ir.functor import IRRewriter
from hidet_lang.ir.node import at
from hidet_lang.ir.types import DataType, Type, VoidType, void


class Parser(StatementParser, AssignmentParser, CallParser):
    """Translates one Python function's AST into an IR `Function`."""

    def parse_function(self, fdef: ast.FunctionDef) -> tuple[Function, FunctionContext]:
        """The IR function for `fdef`, and what its body said about attributes and callees."""
        with at(self.span(fdef)):
            return self._parse_function(fdef)

    def _parse_function(self, fdef: ast.FunctionDef) -> tuple[Function, FunctionContext]:
        self.ctx = FunctionContext(fdef.name)
        args = fdef.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise self.error(fdef, "kernel parameters are plain `name: type` pairs (no defaults, *args or **kwargs)",
                             DSLSyntaxError)
        params = []
        for a in args.args:
            if a.annotation is None:
                raise self.error(a, f"parameter '{a.arg}' needs a type annotation, e.g. `{a.arg}: f32[16]` or "
                                    f"`{a.arg}: i32`", DSLTypeError)
            value = self.annotation_value(a.annotation)
            if isinstance(value, ParamTypes):  # meta.types([...]): one parameter per type, bound as a tuple
                with at(self.span(a)):
                    group = tuple(E.Var(self.fresh_name(f"{a.arg}_{k}"), self.as_type(a.annotation, t))
                                  for k, t in enumerate(value.types))
                self.bind(a.arg, group)
                params.extend(group)
                continue
            with at(self.span(a)):
                var = E.Var(self.fresh_name(a.arg), self.as_type(a.annotation, value))
            self.bind(a.arg, var)
            params.append(var)
        declared_ret = self.return_annotation(fdef.returns)
        self.ctx.declared_return = declared_ret
        if fdef.name not in (a.arg for a in args.args):
            self.bind(fdef.name, RecursiveSelf(fdef.name, tuple(params)))
        has_docstring = ast.get_docstring(fdef, clean=False) is not None
        body = self.block(fdef.body[1:] if has_docstring else fdef.body)
        ctx = self.ctx
        kind = ctx.kind or (FuncKind.CUDA_KERNEL if ctx.cuda else FuncKind.CPU_INTERNAL)
        if ctx.name != fdef.name:  # recursive calls name the `def`, and attrs.func_name renamed it
            body = _CallRenamer(fdef.name, ctx.name).visit(body)
        ret = declared_ret if declared_ret is not None else self.inferred_return_type(fdef)
        if declared_ret is None and ctx.return_types:
            body = _ReturnCaster(ret).visit(body)
        if kind == FuncKind.PUBLIC and not (isinstance(ret, VoidType) or returnable_to_python(ret)):
            raise self.error(fdef, f"a 'public' function returns to Python a bool, an integer, f32 or f64, not {ret}; "
                                   "write other results into a tensor argument")
        if kind in HOST_CALLABLE_KINDS and kind != FuncKind.PUBLIC and not isinstance(ret, VoidType):
            raise self.error(fdef, f"a '{kind}' function cannot return a value; write results into a tensor "
                                   "argument (only 'public', 'cpu_internal' and 'cuda_internal' functions return "
                                   "values)")
        cuda = CudaAttrs(**ctx.cuda, spans=tuple(ctx.cuda_spans.items())) if ctx.cuda else None
        func = Function(ctx.name, tuple(params), ret, body, FuncAttrs(kind, cuda, ctx.kind is None, ctx.noinline,
                                                                 ctx.fast_math, ctx.no_alias))
        return func, ctx

    def return_annotation(self, returns: ast.expr | None) -> Type | None:
        """The declared return type: None without an annotation, void for `-> None`."""
        if returns is None:
            return None
        if isinstance(returns, ast.Constant) and returns.value in (None, "None"):
            return void
        return self.annotation_type(returns)

    def inferred_return_type(self, fdef: ast.FunctionDef) -> Type:
        """The return type of a function without a return annotation: the promotion of what its returns return.

        `return 1` in one branch and `return x` (an f32) in another give f32, as `1 + x` would.
        """
        assert self.ctx is not None
        types = self.ctx.return_types
        if not types:
            return void
        result = types[0]
        for t in types[1:]:
            common = semantics.common_type(result, t)
            if common is None:
                raise self.error(fdef, f"'{fdef.name}' returns values of incompatible types {result} and {t}; "
                                       "annotate its return type, e.g. `-> f32`")
            result = common
        return result


class _CallRenamer(IRRewriter):
    """Calls of `old` become calls of `new`."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def visit_Call(self, c: E.Call) -> E.Expr:
        c = self.rebuild(c)
        return dataclasses.replace(c, func_name=self.new) if c.func_name == self.old else c


class _ReturnCaster(IRRewriter):
    """Converts every returned value to the function's return type."""

    def __init__(self, ret: Type) -> None:
        super().__init__()
        self.ret = ret

    def visit_ReturnStmt(self, s: S.ReturnStmt) -> S.Stmt:
        if s.value is None or s.value.type == self.ret or not isinstance(self.ret, DataType):
            return s
        return dataclasses.replace(s, value=semantics.convert_to(s.value, self.ret))
