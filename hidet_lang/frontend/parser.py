"""Python AST -> IR: one `visit_<AstNode>` method per supported construct.

Values are of two kinds. Host values (Python ints, floats, tuples, task mappings, helper functions, other
script functions, data types) are evaluated while parsing; IR values become IR. A `for` loop dispatches on
what its iterable evaluates to, so new loop kinds need no parser change.

Python `//` and `/` on integers both lower to C division, which truncates toward zero, and `%` to C's
remainder, whose sign follows the dividend (so `-7 // 2 == -3` and `-7 % 2 == -1` in a kernel). On floats
`//` is `floor(a / b)` and `%` is C's `fmod` (the sign of the dividend: `-7.0 % 2.0 == -1.0`). Expressions
made only of host values are evaluated by Python with its own rules.

Tuple assignment reads every right-hand value before it stores any (`a, b = b, a` swaps). A function without
a return annotation returns the promotion of the types of its `return` values (`return 1` and `return x`
with `x: f32` give f32).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hidet_lang.errors import (
    DSLAttributeError,
    DSLError,
    DSLNameError,
    DSLSyntaxError,
    DSLTypeError,
    DSLValueError,
)
from hidet_lang.frontend import builtins as B
from hidet_lang.frontend import semantics
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import FUNC_KINDS, HOST_CALLABLE_KINDS, CudaAttrs, FuncAttrs, FuncKind, Function
from hidet_lang.ir.functor import IRRewriter
from hidet_lang.ir.mapping import MappingOn, TaskMapping
from hidet_lang.ir.node import at
from hidet_lang.ir.span import Span
from hidet_lang.ir.types import (
    DataType,
    PointerType,
    TensorType,
    Type,
    VoidType,
    int32,
    void,
)

_HOST_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.MatMult: operator.matmul,
}
_IR_BINOPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "/", ast.Mod: "%",
    ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
}
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_HOST_COMPARE = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Eq: operator.eq,
    ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_CONSTRUCT_NAMES = {
    "With": "a `with` statement", "AsyncWith": "an `async with` statement", "Try": "a `try` statement",
    "TryStar": "a `try` statement", "Raise": "a `raise` statement", "Global": "a `global` statement",
    "Nonlocal": "a `nonlocal` statement", "Delete": "a `del` statement", "Import": "an `import` statement",
    "ImportFrom": "an `import` statement", "ClassDef": "a class definition", "FunctionDef": "a nested function",
    "AsyncFunctionDef": "a nested function", "Yield": "`yield`", "YieldFrom": "`yield from`",
    "Await": "`await`", "Set": "a set literal", "SetComp": "a set comprehension", "Dict": "a dict literal",
    "DictComp": "a dict comprehension",
    "JoinedStr": "an f-string", "Starred": "a starred expression",
    "NamedExpr": "an assignment expression (:=)", "Match": "a `match` statement", "Slice": "a slice",
    "AsyncFor": "an `async for` loop",
}


@dataclass
class FunctionContext:
    """What the parser learns about the function being parsed besides its body."""

    name: str
    kind: FuncKind | None = None
    cuda: dict[str, Any] = field(default_factory=dict)
    cuda_spans: dict[str, Span] = field(default_factory=dict)
    declared_return: Type | None = None
    return_types: list[Type] = field(default_factory=list)
    callees: list[Any] = field(default_factory=list)


class _LoopFrame:
    """One enclosing loop: IR loops allow break/continue, unrolled ones do not."""

    def __init__(self, unrolled: bool) -> None:
        self.unrolled = unrolled


class Parser:
    """Translates one Python function's AST into an IR `Function`."""

    def __init__(self, source_file: str, line_offset: int, col_offset: int, host_scope: Callable[[str], Any]):
        self.file = source_file
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.lookup_host = host_scope
        self.scopes: list[dict[str, Any]] = [{}]
        self.stmts: list[list[S.Stmt]] = []
        self.loops: list[_LoopFrame] = []
        self.names_used: dict[str, int] = {}
        self.ctx: FunctionContext | None = None

    # ---------------------------------------------------------------------------------------------- helpers
    def span(self, node: ast.AST) -> Span:
        """The user's source position of `node`."""
        return Span(self.file, getattr(node, "lineno", 1) + self.line_offset,
                    getattr(node, "col_offset", 0) + self.col_offset)

    def error(self, node: ast.AST, message: str, cls: type[DSLError] = DSLTypeError) -> DSLError:
        """A DSL error of class `cls` at `node`."""
        return cls(message, self.span(node))

    def fresh_name(self, hint: str) -> str:
        """A variable name unique in the function, based on `hint`."""
        count = self.names_used.get(hint, 0)
        self.names_used[hint] = count + 1
        return hint if count == 0 else f"{hint}_{count}"

    def emit(self, stmt: S.Stmt) -> None:
        """Append a statement to the block being built."""
        self.stmts[-1].append(stmt)

    def lookup(self, name: str, node: ast.AST) -> Any:
        """The value of `name`: kernel locals first, then the enclosing Python scopes, then builtins."""
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        found, value = self.lookup_host(name)
        if found:
            return value
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(node, f"name '{name}' is not defined", DSLNameError)

    def bind(self, name: str, value: Any) -> None:
        """Bind `name` in the innermost scope."""
        self.scopes[-1][name] = value

    def host_call(self, node: ast.AST, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a Python function while parsing, turning its errors into DSL errors at `node`."""
        try:
            return func(*args, **kwargs)
        except DSLError:
            raise
        except (TypeError, ValueError, ArithmeticError, IndexError, KeyError, AttributeError) as e:
            cls = DSLTypeError if isinstance(e, TypeError) else DSLValueError
            raise self.error(node, str(e), cls) from None

    def block(self, body: list[ast.stmt], new_scope: bool = True, bindings: dict[str, Any] | None = None) -> S.Stmt:
        """Parse statements into one IR statement, in a new scope holding `bindings`."""
        self.stmts.append([])
        if new_scope:
            self.scopes.append(dict(bindings or {}))
        try:
            for s in body:
                self.visit_stmt(s)
        finally:
            if new_scope:
                self.scopes.pop()
        return S.seq(self.stmts.pop())

    # ---------------------------------------------------------------------------------------------- function
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
            ptype = self.annotation_type(a.annotation)
            with at(self.span(a)):
                var = E.Var(self.fresh_name(a.arg), ptype)
            self.bind(a.arg, var)
            params.append(var)
        declared_ret = self.annotation_type(fdef.returns) if fdef.returns is not None else None
        self.ctx.declared_return = declared_ret
        has_docstring = ast.get_docstring(fdef, clean=False) is not None
        body = self.block(fdef.body[1:] if has_docstring else fdef.body)
        ctx = self.ctx
        kind = ctx.kind or (FuncKind.CUDA_KERNEL if ctx.cuda else FuncKind.CPU_INTERNAL)
        ret = declared_ret if declared_ret is not None else self.inferred_return_type(fdef)
        if declared_ret is None and ctx.return_types:
            body = _ReturnCaster(ret).visit(body)
        if kind in HOST_CALLABLE_KINDS and not isinstance(ret, VoidType):
            raise self.error(fdef, f"a '{kind}' function cannot return a value; write results into a tensor "
                                   "argument (only 'cpu_internal'/'cuda_internal' functions return values)")
        cuda = CudaAttrs(**ctx.cuda, spans=tuple(ctx.cuda_spans.items())) if ctx.cuda else None
        func = Function(ctx.name, tuple(params), ret, body, FuncAttrs(kind, cuda, ctx.kind is None))
        return func, ctx

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

    def annotation_type(self, node: ast.expr) -> Type:
        """Evaluate a type annotation (strings too, for `from __future__ import annotations`)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                inner = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                raise self.error(node, f"cannot parse the annotation {node.value!r}", DSLSyntaxError) from None
            ast.copy_location(inner, node)
            for n in ast.walk(inner):
                n.lineno, n.col_offset = node.lineno, node.col_offset
            node = inner
        value = self.visit_expr(node)
        if isinstance(value, type) and value in B.PYTHON_CASTS:
            return B._as_dtype(B.PYTHON_CASTS[value])
        if isinstance(value, str):
            try:
                return B._as_dtype(value)
            except ValueError as e:
                raise self.error(node, str(e)) from None
        if isinstance(value, (DataType, TensorType, PointerType)):
            return value
        raise self.error(node, f"{ast.unparse(node)} is not a type; write e.g. f32, i32, f32[16, 16] or ~f32")

    # ---------------------------------------------------------------------------------------------- statements
    def visit_stmt(self, node: ast.stmt) -> None:
        """Parse one statement, appending IR to the current block."""
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(node)
        with at(self.span(node)):
            method(node)

    def unsupported(self, node: ast.AST) -> DSLSyntaxError:
        """The error for a Python construct the DSL does not have."""
        name = type(node).__name__
        what = _CONSTRUCT_NAMES.get(name, f"the Python construct '{name}'")
        return self.error(node, f"{what} is not supported inside a @hidet.script function", DSLSyntaxError)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_Expr(self, node: ast.Expr) -> None:
        value = self.visit_expr(node.value)
        if isinstance(value, (E.Call, E.Intrinsic)):
            self.emit(S.EvaluateStmt(value))
        elif isinstance(value, S.AsmStmt):
            self.emit(value)

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit_expr(node.value)
        if any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets):
            value = self.snapshot(value, node)
        for target in node.targets:
            self.assign(target, value, node)

    def snapshot(self, value: Any, node: ast.stmt) -> Any:
        """`value` with every IR scalar or pointer in it (recursively in tuples) copied into a fresh variable.

        Python evaluates the whole right-hand side of `a, b = b, a` before it stores anything; the copies make
        the IR do the same, so that a store to one target cannot change the value stored to a later one.
        """
        if isinstance(value, (tuple, list)):
            return type(value)(self.snapshot(v, node) for v in value)
        if not isinstance(value, E.Expr) or isinstance(value, (E.Constant, E.StringLiteral)):
            return value
        if not isinstance(value.type, (DataType, PointerType)):
            return value
        tmp = E.Var(self.fresh_name("tmp"), value.type)
        self.emit(S.DeclareStmt(tmp, value))
        return tmp

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "an annotated declaration names one variable, e.g. `acc: f32 = 0.0`", DSLSyntaxError)
        vtype = self.annotation_type(node.annotation)
        name = node.target.id
        var = E.Var(self.fresh_name(name), vtype)
        init = None
        if node.value is not None:
            value = self.visit_expr(node.value)
            if isinstance(value, B.LocalTensorRequest):
                raise self.error(node, "declare a local tensor without an annotation: `x = register_tensor(...)`")
            init = self.host_call(node, semantics.assignable, vtype, value, f"'{name}'")
        self.emit(S.DeclareStmt(var, init))
        self.bind(name, var)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        target = node.target
        load = ast.copy_location(ast.Name(target.id, ast.Load()), target) if isinstance(target, ast.Name) else None
        if isinstance(target, ast.Subscript):
            load = ast.copy_location(ast.Subscript(target.value, target.slice, ast.Load()), target)
        if load is None:
            raise self.error(node, "augmented assignment needs a variable or an element, e.g. `acc += x`",
                             DSLSyntaxError)
        current = self.visit_expr(load)
        rhs = self.visit_expr(node.value)
        value = self.binop(node, node.op, current, rhs)
        self.assign(target, value, node)

    def assign(self, target: ast.expr, value: Any, node: ast.stmt) -> None:
        """Assign `value` to `target` (a name, a tuple of targets, an element or an `attrs` field)."""
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                n = len(value) if isinstance(value, (tuple, list)) else "a non-tuple"
                raise self.error(node, f"cannot unpack {n} value(s) into {len(target.elts)} targets", DSLValueError)
            for t, v in zip(target.elts, value):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            base = self.visit_expr(target.value)
            indices = self.subscript_indices(target)
            if not isinstance(base, E.Expr):
                raise self.error(target, f"cannot store into {semantics.describe(base)}")
            elem = self.host_call(target, semantics.element, base, indices)
            stored = self.host_call(target, semantics.assignable, elem.type, value, "an element")
            self.emit(S.BufferStoreStmt(base, elem.indices, stored))
        elif isinstance(target, ast.Attribute):
            owner = self.visit_expr(target.value)
            if isinstance(owner, B._AttrsNamespace):
                self.set_attr(owner, target.attr, value, target)
            else:
                raise self.error(target, f"cannot set attribute '{target.attr}' of {semantics.describe(owner)}",
                                 DSLAttributeError)
        else:
            raise self.unsupported(target)

    def assign_name(self, name: str, value: Any, node: ast.stmt) -> None:
        """`name = value`: a store to an existing variable, a new variable, a local tensor, or a host alias."""
        existing = None
        for scope in reversed(self.scopes):
            if name in scope:
                existing = scope[name]
                break
        if isinstance(existing, E.Var) and not isinstance(value, (B.LocalTensorRequest, B.TensorPointerRequest)):
            converted = self.host_call(node, semantics.assignable, existing.type, value, f"'{name}'")
            self.emit(S.AssignStmt(existing, converted))
            return
        if isinstance(value, B.LocalTensorRequest):
            var = E.Var(self.fresh_name(name), TensorType(value.dtype, value.shape, value.layout))
            self.emit(S.DeclareStmt(var, None, value.scope))
        elif isinstance(value, B.TensorPointerRequest):
            var = E.Var(self.fresh_name(name), PointerType(TensorType(value.dtype, value.shape)))
            init = None
            if value.init is not None:
                init = self.host_call(node, semantics.assignable, var.type, value.init, f"'{name}'")
            self.emit(S.DeclareStmt(var, init))
        elif isinstance(value, (E.Expr, int, float)):
            if isinstance(value, E.Expr) and isinstance(value.type, TensorType):
                self.bind(name, value)  # an alias of a tensor
                return
            vtype = self.host_call(node, semantics.new_variable_type, value)
            init = self.host_call(node, semantics.assignable, vtype, value, f"'{name}'")
            var = E.Var(self.fresh_name(name), vtype)
            self.emit(S.DeclareStmt(var, init))
        else:
            self.bind(name, value)  # a host value: a mapping, a tuple, a function...
            return
        self.bind(name, var)

    def set_attr(self, owner: Any, attr: str, value: Any, node: ast.AST) -> None:
        """`attrs.<attr> = value` or `attrs.cuda.<attr> = value`."""
        assert self.ctx is not None
        if attr not in owner.names:
            valid = ", ".join(f"{owner.prefix}{n}" for n in owner.names)
            raise self.error(node, f"unknown attribute '{owner.prefix}{attr}'; valid attributes: {valid}",
                             DSLAttributeError)
        if owner is B.attrs and attr == "func_kind":
            if value not in FUNC_KINDS:
                raise self.error(node, f"func_kind must be one of {', '.join(map(repr, FUNC_KINDS))}, got {value!r}",
                                 DSLValueError)
            self.ctx.kind = FuncKind(value)
        elif owner is B.attrs and attr == "func_name":
            if not isinstance(value, str) or not value.isidentifier():
                raise self.error(node, f"func_name must be an identifier, got {value!r}", DSLValueError)
            self.ctx.name = value
        elif owner is B.attrs:
            raise self.error(node, "set CUDA attributes as attrs.cuda.<name>", DSLAttributeError)
        else:
            self.ctx.cuda[attr] = self.cuda_attr_value(attr, value, node)
            self.ctx.cuda_spans[attr] = self.span(node)

    def cuda_attr_value(self, attr: str, value: Any, node: ast.AST) -> Any:
        """Check and convert a CUDA launch attribute."""
        if attr == "min_blocks":
            if not isinstance(value, int) or value <= 0:
                raise self.error(node, f"min_blocks must be a positive int, got {value!r}", DSLValueError)
            return value
        if attr == "dynamic_smem_bytes":
            return self.host_call(node, E.convert, value)
        dims = value if isinstance(value, (tuple, list)) else (value,)
        if not 1 <= len(dims) <= 3:
            raise self.error(node, f"{attr} has 1 to 3 dimensions, got {len(dims)}", DSLValueError)
        return tuple(self.host_call(node, E.convert, d) for d in dims)

    def visit_If(self, node: ast.If) -> None:
        cond = self.visit_expr(node.test)
        if not isinstance(cond, E.Expr):
            chosen = node.body if cond else node.orelse
            self.emit(self.block(chosen))
            return
        c = self.host_call(node.test, semantics.condition, cond, "an `if` condition")
        then_body = self.block(node.body)
        else_body = self.block(node.orelse) if node.orelse else None
        self.emit(S.IfStmt(c, then_body, else_body))

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error(node, "`while ... else` is not supported", DSLSyntaxError)
        cond = self.visit_expr(node.test)
        c = self.host_call(node.test, semantics.condition, cond, "a `while` condition")
        self.loops.append(_LoopFrame(unrolled=False))
        body = self.block(node.body)
        self.loops.pop()
        self.emit(S.WhileStmt(c, body))

    def visit_Break(self, node: ast.Break) -> None:
        self.check_in_loop(node, "break")
        self.emit(S.BreakStmt())

    def visit_Continue(self, node: ast.Continue) -> None:
        self.check_in_loop(node, "continue")
        self.emit(S.ContinueStmt())

    def check_in_loop(self, node: ast.AST, what: str) -> None:
        """`break`/`continue` need an enclosing loop that exists at run time."""
        if not self.loops:
            raise self.error(node, f"`{what}` outside a loop", DSLSyntaxError)
        if self.loops[-1].unrolled:
            raise self.error(node, f"`{what}` cannot leave a loop unrolled while parsing (meta.range)",
                             DSLSyntaxError)

    def visit_Return(self, node: ast.Return) -> None:
        assert self.ctx is not None
        if node.value is None:
            self.emit(S.ReturnStmt(None))
            return
        value = self.host_call(node, E.convert, self.visit_expr(node.value))
        if isinstance(value.type, TensorType):
            raise self.error(node, "a function cannot return a tensor; write into a tensor argument")
        if isinstance(value.type, VoidType):
            raise self.error(node, "cannot return the result of a function that returns nothing")
        if self.ctx.declared_return is not None:
            value = self.host_call(node, semantics.assignable, self.ctx.declared_return, value, "the return value")
        self.ctx.return_types.append(value.type)
        self.emit(S.ReturnStmt(value))

    def visit_Assert(self, node: ast.Assert) -> None:
        cond = self.visit_expr(node.test)
        msg = self.visit_expr(node.msg) if node.msg is not None else None
        if msg is not None and not isinstance(msg, str):
            raise self.error(node.msg, "an assertion message must be a Python string")
        text = msg if msg is not None else f"assertion failed: {ast.unparse(node.test)}"
        if not isinstance(cond, E.Expr):
            if not cond:
                raise self.error(node, f"static assertion failed: {text}", DSLValueError)
            return
        c = self.host_call(node.test, semantics.condition, cond, "an assertion")
        self.emit(S.AssertStmt(c, text))

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(node, "`for ... else` is not supported", DSLSyntaxError)
        iterable = self.visit_expr(node.iter)
        names = self.loop_target_names(node.target)
        if isinstance(iterable, range) or (isinstance(iterable, _RangeCall)):
            self.for_range(node, names, iterable)
        elif isinstance(iterable, B.GridLoop):
            self.for_grid(node, names, iterable)
        elif isinstance(iterable, MappingOn):
            self.for_mapping(node, names, iterable)
        elif isinstance(iterable, TaskMapping):
            raise self.error(node.iter, "iterate over a task mapping through a worker: `for i, j in m.on(worker)`")
        elif isinstance(iterable, (B.MetaRange, tuple, list)):
            values = iterable.values if isinstance(iterable, B.MetaRange) else tuple(iterable)
            self.loops.append(_LoopFrame(unrolled=True))
            for v in values:
                self.emit(self.block(node.body, bindings=self.unpack(node.target, names, v)))
            self.loops.pop()
        else:
            raise self.error(node.iter, f"cannot loop over {semantics.describe(iterable)}; use range(...), grid(...), "
                                        "mapping.on(worker) or meta.range(...)")

    def loop_target_names(self, target: ast.expr) -> list[str]:
        """The names a `for` binds."""
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(t, ast.Name) for t in target.elts):
            return [t.id for t in target.elts]  # type: ignore[union-attr]
        raise self.error(target, "a loop variable is a name or a tuple of names", DSLSyntaxError)

    def unpack(self, target: ast.expr, names: list[str], value: Any) -> dict[str, Any]:
        """Bindings of an unrolled loop's variables to one value."""
        if isinstance(target, ast.Name):
            return {names[0]: value}
        if not isinstance(value, (tuple, list)) or len(value) != len(names):
            raise self.error(target, f"cannot unpack {value!r} into {len(names)} loop variables", DSLValueError)
        return dict(zip(names, value))

    def loop_body(self, node: ast.For, bindings: dict[str, Any]) -> S.Stmt:
        """The body of a run-time loop, with the loop variables bound."""
        self.loops.append(_LoopFrame(unrolled=False))
        try:
            return self.block(node.body, bindings=bindings)
        finally:
            self.loops.pop()

    def for_range(self, node: ast.For, names: list[str], rng: Any) -> None:
        """`for i in range(start, stop, step)`."""
        if len(names) != 1:
            raise self.error(node.target, "range() gives one loop variable", DSLSyntaxError)
        bounds = rng.bounds if isinstance(rng, _RangeCall) else (rng.start, rng.stop, rng.step)
        start, stop, step = (self.host_call(node.iter, E.convert, x) for x in bounds)
        if isinstance(step, E.Constant) and step.value == 0:
            raise self.error(node.iter, "range() step must not be zero", DSLValueError)
        itype = self.host_call(node.iter, semantics.index_type, [start, stop, step])
        var = E.Var(self.fresh_name(names[0]), itype)
        body = self.loop_body(node, {names[0]: var})
        start, stop, step = (semantics.convert_to(x, itype) for x in (start, stop, step))
        self.emit(S.ForStmt(var, start, stop, step, body))

    def for_grid(self, node: ast.For, names: list[str], g: B.GridLoop) -> None:
        """`for i, j in grid(m, n)`: nested loops."""
        extents = [self.host_call(node.iter, E.convert, x) for x in g.extents]
        vars_ = []
        for k, ext in enumerate(extents):
            itype = self.host_call(node.iter, semantics.index_type, [ext])
            hint = names[k] if len(names) == len(extents) else f"{names[0]}_{k}"
            vars_.append(E.Var(self.fresh_name(hint), itype))
        if len(names) == len(extents):
            bindings = dict(zip(names, vars_))
        elif len(names) == 1:
            bindings = {names[0]: vars_[0] if len(vars_) == 1 else tuple(vars_)}
        else:
            raise self.error(node.target, f"grid has {len(extents)} dimensions but the loop names {len(names)} "
                                          "variables", DSLValueError)
        body = self.loop_body(node, bindings)
        for var, ext, kind in reversed(list(zip(vars_, extents, g.kinds))):
            stop = semantics.convert_to(ext, var.type)
            body = S.ForStmt(var, E.Constant(0, var.type), stop, E.Constant(1, var.type), body, kind)
        self.emit(body)

    def for_mapping(self, node: ast.For, names: list[str], on: MappingOn) -> None:
        """`for i, j in mapping.on(worker)`."""
        m = on.mapping
        dims = len(m.task_shape)
        if len(names) != dims:
            raise self.error(node.target, f"the mapping's tasks have {dims} coordinate(s) but the loop names "
                                          f"{len(names)} variable(s)", DSLValueError)
        worker = self.host_call(node.iter, E.convert, on.worker)
        wt = worker.type
        if not (isinstance(wt, DataType) and wt.is_integer):
            raise self.error(node.iter, f"a worker index must be an integer, got {semantics.describe(worker)}")
        if isinstance(worker, E.Constant) and not 0 <= worker.value < m.num_workers:
            raise self.error(node.iter, f"worker {worker.value} is outside the mapping's {m.num_workers} workers",
                             DSLValueError)
        vars_ = tuple(E.Var(self.fresh_name(n), int32) for n in names)
        body = self.loop_body(node, dict(zip(names, vars_)))
        self.emit(S.ForMappingStmt(vars_, m, worker, body))

    # ---------------------------------------------------------------------------------------------- expressions
    def visit_expr(self, node: ast.expr) -> Any:
        """Evaluate an expression: a host value or an IR expression."""
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(node)
        with at(self.span(node)):
            return method(node)

    def expr_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.visit_expr(e) for e in node.elts)

    def expr_List(self, node: ast.List) -> list[Any]:
        return [self.visit_expr(e) for e in node.elts]

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        owner = self.visit_expr(node.value)
        if isinstance(owner, E.Expr):
            raise self.error(node, f"{semantics.describe(owner)} has no attribute '{node.attr}'", DSLAttributeError)
        if owner is B.attrs and node.attr == "cuda":
            return B.cuda_attrs
        if isinstance(owner, B._AttrsNamespace):
            raise self.error(node, f"attrs fields can be set, not read ({owner.prefix}{node.attr})", DSLAttributeError)
        try:
            return getattr(owner, node.attr)
        except AttributeError:
            raise self.error(node, f"{semantics.describe(owner)} has no attribute '{node.attr}'",
                             DSLAttributeError) from None

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        return self.binop(node, node.op, self.visit_expr(node.left), self.visit_expr(node.right))

    def binop(self, node: ast.AST, op: ast.operator, a: Any, b: Any) -> Any:
        """`a op b` on host values (by Python) or IR values (as IR)."""
        if not isinstance(a, E.Expr) and not isinstance(b, E.Expr):
            fn = _HOST_BINOPS.get(type(op))
            if fn is None:
                raise self.unsupported(op)
            return self.host_call(node, fn, a, b)
        if isinstance(op, ast.Pow):
            return self.power(node, a, b)
        if isinstance(op, ast.FloorDiv) and _is_float_value(a, b):
            return semantics.math_call("floor", self.host_call(node, semantics.binary, "/", a, b))
        sym = _IR_BINOPS.get(type(op))
        if sym is None:
            raise self.error(node, f"operator {type(op).__name__} is not supported on IR values", DSLSyntaxError)
        return self.host_call(node, semantics.binary, sym, a, b)

    def power(self, node: ast.AST, a: Any, b: Any) -> E.Expr:
        """`a ** b`: small constant integer exponents become multiplications, others call pow."""
        if isinstance(b, int) and not isinstance(b, bool) and 0 < b <= 4 and isinstance(a, E.Expr):
            result = a
            for _ in range(b - 1):
                result = self.host_call(node, semantics.binary, "*", result, a)
            return result
        return self.host_call(node, semantics.math_call, "pow", a, b)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.visit_expr(node.operand)
        if not isinstance(v, E.Expr):
            fn = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
            return self.host_call(node, fn[type(node.op)], v)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            self.host_call(node, semantics.scalar_type, v, "unary -")
            return E.UnaryOp("-", v)
        if isinstance(node.op, ast.Not):
            return self.host_call(node, semantics.logical_not, v)
        if isinstance(v, (E.TensorElement, E.Var)) and not isinstance(v.type, (TensorType, PointerType)) or \
                isinstance(v, E.TensorElement):
            return E.Address(v)
        if isinstance(v, E.Var) and isinstance(v.type, TensorType):
            return semantics.first_element_address(v)
        raise self.error(node, "`~` takes the address of a variable or an element, e.g. `~a[i]`")

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = self.visit_expr(node.values[0])
        for operand in node.values[1:]:
            if not isinstance(result, E.Expr):
                if (op == "and" and not result) or (op == "or" and result):
                    return result
                result = self.visit_expr(operand)
                continue
            rhs = self.visit_expr(operand)
            if not isinstance(rhs, E.Expr):
                if (op == "and" and rhs) or (op == "or" and not rhs):
                    continue
                return rhs if op == "and" else True
            result = self.host_call(node, semantics.logical, op,
                                    semantics.condition(result, op), semantics.condition(rhs, op))
        return result

    def expr_Compare(self, node: ast.Compare) -> Any:
        left = self.visit_expr(node.left)
        result: Any = True
        for op, comparator in zip(node.ops, node.comparators):
            right = self.visit_expr(comparator)
            if not isinstance(left, E.Expr) and not isinstance(right, E.Expr):
                part = self.host_call(node, _HOST_COMPARE[type(op)], left, right)
            else:
                sym = _COMPARE.get(type(op))
                if sym is None:
                    raise self.error(node, f"`{type(op).__name__}` comparisons are not supported on IR values",
                                     DSLSyntaxError)
                part = self.host_call(node, semantics.binary, sym, left, right)
            if result is True:
                result = part
            elif isinstance(result, E.Expr) or isinstance(part, E.Expr):
                if not isinstance(part, E.Expr):
                    result = result if part else False
                elif not isinstance(result, E.Expr):
                    result = part if result else False
                else:
                    result = E.BinaryOp("&&", result, part)
            else:
                result = result and part
            if result is False:
                return False
            left = right
        return result

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.visit_expr(node.test)
        if not isinstance(cond, E.Expr):
            return self.visit_expr(node.body if cond else node.orelse)
        a, b = self.visit_expr(node.body), self.visit_expr(node.orelse)
        c = self.host_call(node, semantics.condition, cond, "a conditional expression")
        ea, eb = self.host_call(node.body, E.convert, a), self.host_call(node.orelse, E.convert, b)
        t = semantics.common_type(ea.type, eb.type)
        if isinstance(t, DataType):
            ea, eb = semantics.convert_to(ea, t), semantics.convert_to(eb, t)
        return E.IfThenElse(c, ea, eb)

    def subscript_indices(self, node: ast.Subscript) -> tuple[Any, ...]:
        """The indices of `x[...]`."""
        sl = node.slice
        if isinstance(sl, ast.Slice) or (isinstance(sl, ast.Tuple) and any(isinstance(e, ast.Slice) for e in sl.elts)):
            raise self.error(node, "slices of tensors are not supported here; index each element", DSLSyntaxError)
        value = self.visit_expr(sl)
        return tuple(value) if isinstance(value, tuple) else (value,)

    def tensor_slice(self, node: ast.Subscript, base: E.Expr) -> E.Expr:
        """`a[i, :]`: leading indices then whole trailing dimensions, as a pointer to that contiguous sub-tensor
        (what a function taking a tensor parameter accepts)."""
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        first = next(k for k, p in enumerate(parts) if isinstance(p, ast.Slice))
        rest = parts[first:]
        if any(not isinstance(p, ast.Slice) or p.lower or p.upper or p.step for p in rest):
            raise self.error(node, "a tensor slice takes leading indices followed by whole dimensions only, e.g. "
                                   "a[i, :] (a contiguous part of the tensor)", DSLSyntaxError)
        t = base.type
        tensor = t if isinstance(t, TensorType) else t.base if isinstance(t, PointerType) else None
        if not isinstance(tensor, TensorType) or len(parts) != len(tensor.shape):
            raise self.error(node, f"{semantics.describe(base)} cannot be sliced with {len(parts)} dimension(s)")
        if getattr(tensor, "layout", None) is not None:
            raise self.error(node, "a tensor with a layout cannot be sliced", DSLSyntaxError)
        indices = [self.visit_expr(p) for p in parts[:first]] + [0] * len(rest)
        element = self.host_call(node, semantics.element, base, tuple(indices))
        return E.Reinterpret(E.Address(element), PointerType(TensorType(tensor.dtype, tuple(tensor.shape[first:]))))

    def expr_Lambda(self, node: ast.Lambda) -> Callable[..., Any]:
        """A lambda is inlined where it is called: its body is parsed with the arguments bound."""
        args = node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise self.error(node, "a kernel lambda takes plain positional parameters", DSLSyntaxError)
        names = [a.arg for a in args.args]

        def inline(*values: Any) -> Any:
            if len(values) != len(names):
                raise TypeError(f"the lambda takes {len(names)} argument(s), got {len(values)}")
            self.scopes.append(dict(zip(names, values)))
            try:
                return self.visit_expr(node.body)
            finally:
                self.scopes.pop()

        return inline

    def comprehension(self, node: ast.ListComp | ast.GeneratorExp) -> list[Any]:
        """The elements of a list comprehension or generator over Python values, expanded while parsing."""
        results: list[Any] = []

        def expand(k: int) -> None:
            if k == len(node.generators):
                results.append(self.visit_expr(node.elt))
                return
            generator = node.generators[k]
            iterable = self.visit_expr(generator.iter)
            if isinstance(iterable, B.MetaRange):
                iterable = iterable.values
            if isinstance(iterable, E.Expr) or isinstance(iterable, _RangeCall) or not hasattr(iterable, "__iter__"):
                raise self.error(generator.iter, "a comprehension in a kernel iterates over Python values (e.g. "
                                                 "range(4) with constant bounds), expanded while parsing")
            names = self.loop_target_names(generator.target)
            for value in iterable:
                self.scopes.append(self.unpack(generator.target, names, value))
                try:
                    conditions = [self.visit_expr(c) for c in generator.ifs]
                    if any(isinstance(c, E.Expr) for c in conditions):
                        raise self.error(generator, "a comprehension's `if` must be a Python value while parsing")
                    if all(conditions):
                        expand(k + 1)
                finally:
                    self.scopes.pop()

        expand(0)
        return results

    def expr_ListComp(self, node: ast.ListComp) -> list[Any]:
        return self.comprehension(node)

    def expr_GeneratorExp(self, node: ast.GeneratorExp) -> tuple[Any, ...]:
        return tuple(self.comprehension(node))

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        base = self.visit_expr(node.value)
        if not isinstance(base, E.Expr):
            if isinstance(base, (DataType, tuple, list, dict, str)):
                index = self.visit_expr(node.slice)
                if isinstance(base, DataType) and isinstance(index, list):
                    index = tuple(index)
                return self.host_call(node, operator.getitem, base, index)
            raise self.error(node, f"{semantics.describe(base)} cannot be indexed")
        sl = node.slice
        if isinstance(sl, ast.Slice) or (isinstance(sl, ast.Tuple) and any(isinstance(e, ast.Slice) for e in sl.elts)):
            return self.tensor_slice(node, base)
        return self.host_call(node, semantics.element, base, self.subscript_indices(node))

    def expr_Call(self, node: ast.Call) -> Any:
        func = self.visit_expr(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                value = self.visit_expr(a.value)
                if not isinstance(value, (tuple, list)):
                    raise self.error(a, "only a Python tuple or list can be unpacked with *", DSLTypeError)
                args.extend(value)
            else:
                args.append(self.visit_expr(a))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(node, "**kwargs is not supported in a kernel call", DSLSyntaxError)
            kwargs[kw.arg] = self.visit_expr(kw.value)
        return self.call(node, func, args, kwargs)

    def call(self, node: ast.Call, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Call `func`: another script function, a cast, a math function, range, or a Python helper."""
        from hidet_lang.frontend.script import ScriptFunction

        any_ir = any(isinstance(a, E.Expr) for a in [*args, *kwargs.values()])
        if isinstance(func, ScriptFunction):
            return self.call_script(node, func, args, kwargs)
        if func is range:
            if kwargs or not 1 <= len(args) <= 3:
                raise self.error(node, "range() takes 1 to 3 positional arguments", DSLTypeError)
            if not any_ir:
                return self.host_call(node, range, *args)
            start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3
                                                                        else 1)
            return _RangeCall((start, stop, step))
        if isinstance(func, DataType):
            if len(args) != 1 or kwargs:
                raise self.error(node, f"{func}() converts one value", DSLTypeError)
            return self.host_call(node, semantics.cast, args[0], func)
        if func in B.PYTHON_CASTS and any_ir:
            if len(args) != 1 or kwargs:
                raise self.error(node, f"{func.__name__}() converts one value", DSLTypeError)
            return self.host_call(node, semantics.cast, args[0], B._as_dtype(B.PYTHON_CASTS[func]))
        if _hashable(func) and func in B.PYTHON_MATH and any_ir:
            if kwargs:
                raise self.error(node, f"{B.PYTHON_MATH[func]}() takes no keyword arguments here", DSLTypeError)
            return self.host_call(node, semantics.math_call, B.PYTHON_MATH[func], *args)
        if func is print:
            raise self.error(node, "print() does not exist in a kernel; use printf(format, ...)", DSLSyntaxError)
        if not callable(func):
            raise self.error(node, f"{semantics.describe(func)} is not callable")
        return self.host_call(node, func, *args, **kwargs)

    def call_script(self, node: ast.Call, func: Any, args: list[Any], kwargs: dict[str, Any]) -> E.Expr:
        """A call of another `@hidet.script` function: checked against its parameters."""
        assert self.ctx is not None
        callee = func.ir
        params = callee.params
        names = [p.name for p in params]
        if len(args) > len(params):
            raise self.error(node, f"{callee.name}() takes {len(params)} argument(s) but {len(args)} were given")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise self.error(node, f"{callee.name}() has no parameter '{k}'; its parameters: {', '.join(names)}")
            if k in bound:
                raise self.error(node, f"{callee.name}() got parameter '{k}' twice")
            bound[k] = v
        missing = [n for n in names if n not in bound]
        if missing:
            raise self.error(node, f"{callee.name}() is missing argument(s): {', '.join(missing)}")
        converted = []
        for p in params:
            try:
                converted.append(semantics.argument(p.type, bound[p.name], f"parameter '{p.name}'"))
            except TypeError as e:
                raise self.error(node, f"{callee.name}(): {e}") from None
        if func not in self.ctx.callees:
            self.ctx.callees.append(func)
        return E.Call(callee.name, tuple(converted), callee.ret_type)


class _ReturnCaster(IRRewriter):
    """Converts every returned value to the function's return type."""

    def __init__(self, ret: Type) -> None:
        super().__init__()
        self.ret = ret

    def visit_ReturnStmt(self, s: S.ReturnStmt) -> S.Stmt:
        if s.value is None or s.value.type == self.ret or not isinstance(self.ret, DataType):
            return s
        return dataclasses.replace(s, value=semantics.convert_to(s.value, self.ret))


@dataclass(frozen=True)
class _RangeCall:
    """`range(...)` with IR bounds (a host `range` object holds host bounds)."""

    bounds: tuple[Any, Any, Any]


def _is_float_value(*values: Any) -> bool:
    for v in values:
        if isinstance(v, float):
            return True
        if isinstance(v, E.Expr) and isinstance(v.type, DataType) and v.type.is_float:
            return True
    return False


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True
