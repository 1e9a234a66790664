"""The parser's core: the state of one function's translation and the helpers every part of the parser uses.

`ParserCore` holds the scopes of the kernel's names, the blocks of statements being built, the enclosing loops
and what is known about the function so far (`FunctionContext`). Its visit shell (`visit_stmt`, `visit_expr`)
sends each Python AST node to the `visit_<Node>` (statements) or `expr_<Node>` (expressions) method that the
parser's mixins define, inside an `at(span)` block: every IR node built while translating that AST node, by the
parser or the helpers it calls, carries the user's source position. A node without a method is an error naming
the construct.
"""

from __future__ import annotations

import ast
import builtins
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from hidet_lang.errors import DSLError, DSLNameError, DSLSyntaxError, DSLTypeError, DSLValueError
from hidet_lang.frontend import semantics
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import FuncKind
from hidet_lang.ir.node import at
from hidet_lang.ir.span import Span
from hidet_lang.ir.types import Type

_CONSTRUCT_NAMES = {
    "AsyncWith": "an `async with` statement", "Try": "a `try` statement",
    "TryStar": "a `try` statement", "Raise": "a `raise` statement", "Global": "a `global` statement",
    "Nonlocal": "a `nonlocal` statement", "Delete": "a `del` statement", "Import": "an `import` statement",
    "ImportFrom": "an `import` statement", "ClassDef": "a class definition", "FunctionDef": "a nested function",
    "AsyncFunctionDef": "a nested function", "Yield": "`yield`", "YieldFrom": "`yield from`",
    "Await": "`await`", "Set": "a set literal", "SetComp": "a set comprehension",
    "JoinedStr": "an f-string", "Starred": "a starred expression",
    "NamedExpr": "an assignment expression (:=)", "Match": "a `match` statement",
    "AsyncFor": "an `async for` loop",
}


@dataclass
class FunctionContext:
    """What the parser learns about the function being parsed besides its body."""

    name: str
    kind: FuncKind | None = None
    noinline: bool = False
    fast_math: bool = False
    no_alias: bool = False
    cuda: dict[str, Any] = field(default_factory=dict)
    cuda_spans: dict[str, Span] = field(default_factory=dict)
    declared_return: Type | None = None
    return_types: list[Type] = field(default_factory=list)
    callees: list[Any] = field(default_factory=list)


RUN_TIME_LOOP = "a loop that runs at run time"

# The errors the parser's checks raise, reported with their own message (other errors are host code's).
_CHECK_ERRORS = (TypeError, ValueError, ArithmeticError, IndexError, KeyError, AttributeError)
_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent) + "/"


def _user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The frames of `tb` outside the hidet_lang package (the user's Python code, and the libraries it calls), as
    a traceback of their own; None when there are none."""
    kept = []
    while tb is not None:
        if not str(Path(tb.tb_frame.f_code.co_filename).resolve()).startswith(_PACKAGE_DIR):
            kept.append(tb)
        tb = tb.tb_next
    result = None
    for frame in reversed(kept):
        result = types.TracebackType(result, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
    return result


@dataclass(frozen=True)
class RunTimeRegion:
    """A block that runs at run time a number of times the parser does not know: `scope_depth` is the index of
    its scope among the parser's scopes, `construct` how error messages name it."""

    scope_depth: int
    construct: str


@dataclass(frozen=True)
class LoopFrame:
    """One enclosing loop: loops that run at run time allow break/continue, loops unrolled while parsing do not."""

    unrolled: bool


class ParserCore:
    """The state of one function's translation, its visit shell, and the helpers the parser's mixins share."""

    def __init__(self, source_file: str, line_offset: int, col_offset: int, host_scope: Callable[[str], Any]):
        self.file = source_file
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.lookup_host = host_scope
        self.scopes: list[dict[str, Any]] = [{}]
        self.stmts: list[list[S.Stmt]] = []
        self.loops: list[LoopFrame] = []
        self.names_used: dict[str, int] = {}
        self.ctx: FunctionContext | None = None
        self.statement_call: ast.expr | None = None  # the call an expression statement is made of, if any
        self.regions: list[RunTimeRegion] = []  # the enclosing loops and branches that run at run time
        self.inferred: dict[E.Var, Span] = {}  # variables typed by their first value, and where it was assigned

    # ---------------------------------------------------------------------------------------------- visit shell
    def visit_stmt(self, node: ast.stmt) -> None:
        """Parse one statement, appending IR to the current block."""
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(node)
        with at(self.span(node)):
            try:
                method(node)
            except DSLError:
                raise
            except Exception as e:  # noqa: BLE001 - errors of the user's Python code become DSL errors
                if _user_traceback(e.__traceback__) is None:
                    raise
                self.raise_host_error(node, e)

    def visit_expr(self, node: ast.expr) -> Any:
        """Evaluate an expression: a host value or an IR expression."""
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(node)
        with at(self.span(node)):
            try:
                return method(node)
            except DSLError:
                raise
            except Exception as e:  # noqa: BLE001 - errors of the user's Python code become DSL errors
                if _user_traceback(e.__traceback__) is None:
                    raise
                self.raise_host_error(node, e)

    # ---------------------------------------------------------------------------------------------- positions, errors
    def span(self, node: ast.AST) -> Span:
        """The user's source position of `node`."""
        return Span(self.file, getattr(node, "lineno", 1) + self.line_offset,
                    getattr(node, "col_offset", 0) + self.col_offset)

    def error(self, node: ast.AST, message: str, cls: type[DSLError] = DSLTypeError) -> DSLError:
        """A DSL error of class `cls` at `node`."""
        return cls(message, self.span(node))

    def unsupported(self, node: ast.AST) -> DSLSyntaxError:
        """The error for a Python construct the DSL does not have."""
        name = type(node).__name__
        what = _CONSTRUCT_NAMES.get(name, f"the Python construct '{name}'")
        return self.error(node, f"{what} is not supported inside a @hidet.script function", DSLSyntaxError)

    def host_call(self, node: ast.AST, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a Python function while parsing, turning its errors into DSL errors at `node`."""
        try:
            return func(*args, **kwargs)
        except DSLError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever the called code raises is reported at the user's line
            self.raise_host_error(node, e)

    def raise_host_error(self, node: ast.AST, error: Exception) -> NoReturn:
        """Raise `error`, raised by Python code run while parsing, as a DSL error at `node`.

        A type, value, arithmetic, index, key or attribute error of the parser's own checks (or of a Python builtin)
        becomes a DSLTypeError or DSLValueError with its message. An error raised in the user's Python code (a
        helper the kernel calls, a host value's method), or of any other kind (OSError, RuntimeError, ...), is also
        chained as the DSL error's cause, with the traceback of the user's frames only."""
        user_frames = _user_traceback(error.__traceback__)
        known = isinstance(error, _CHECK_ERRORS)
        cls = DSLTypeError if isinstance(error, TypeError) else DSLValueError if known else DSLError
        if known and user_frames is None:
            raise self.error(node, str(error), cls) from None
        message = f"{type(error).__name__} raised by Python code run while compiling the kernel: {error}"
        raise self.error(node, message, cls) from error.with_traceback(user_frames)

    # ---------------------------------------------------------------------------------------------- names
    def fresh_name(self, hint: str) -> str:
        """A variable name unique in the function, based on `hint`."""
        count = self.names_used.get(hint, 0)
        self.names_used[hint] = count + 1
        return hint if count == 0 else f"{hint}_{count}"

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

    def loop_target_names(self, target: ast.expr) -> list[str]:
        """The names a `for` (or a comprehension's `for`) binds."""
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(t, ast.Name) for t in target.elts):
            return [t.id for t in target.elts]  # type: ignore[union-attr]
        raise self.error(target, "a loop variable is a name or a tuple of names", DSLSyntaxError)

    def unpack(self, target: ast.expr, names: list[str], value: Any) -> dict[str, Any]:
        """Bindings of the variables of a loop unrolled while parsing to one value."""
        if isinstance(target, ast.Name):
            return {names[0]: value}
        if not isinstance(value, (tuple, list)) or len(value) != len(names):
            raise self.error(target, f"cannot unpack {value!r} into {len(names)} loop variables", DSLValueError)
        return dict(zip(names, value))

    # ---------------------------------------------------------------------------------------------- blocks
    def emit(self, stmt: S.Stmt) -> None:
        """Append a statement to the block being built."""
        self.stmts[-1].append(stmt)

    def store_element(self, node: ast.AST, base: Any, indices: tuple[Any, ...], value: Any) -> None:
        """Emit `base[indices] = value` (from the kernel's own `x[i] = v`, or a helper's), errors at `node`."""
        if not isinstance(base, E.Expr):
            raise self.error(node, f"cannot store into {semantics.describe(base)}")
        elem = self.host_call(node, semantics.element, base, indices)
        stored = self.host_call(node, semantics.assignable, elem.type, value, "an element")
        self.emit(S.BufferStoreStmt(base, elem.indices, stored))

    def block(self, body: list[ast.stmt], bindings: dict[str, Any] | None = None,
              run_time: str | None = None) -> S.Stmt:
        """Parse statements into one IR statement, in a new scope holding `bindings`. `run_time` names the
        construct when the block runs at run time a number of times the parser does not know (a loop body, a
        branch on a run-time condition), which Python values made before it may not be changed in (see
        `check_host_change`)."""
        self.stmts.append([])
        self.scopes.append(dict(bindings or {}))
        if run_time is not None:
            self.regions.append(RunTimeRegion(len(self.scopes) - 1, run_time))
        try:
            for s in body:
                self.visit_stmt(s)
        finally:
            self.scopes.pop()
            if run_time is not None:
                self.regions.pop()
        return S.seq(self.stmts.pop())

    def loop_body(self, body: list[ast.stmt], bindings: dict[str, Any] | None = None, unrolled: bool = False) -> S.Stmt:
        """The body of a loop, with its variables bound; `break`/`continue` in it leave this loop, which
        must then run at run time (`unrolled` marks a loop unrolled while parsing)."""
        self.loops.append(LoopFrame(unrolled))
        try:
            return self.block(body, bindings=bindings, run_time=None if unrolled else RUN_TIME_LOOP)
        finally:
            self.loops.pop()

    # ---------------------------------------------------------------------------------------------- host values
    def made_outside_region(self, name: str) -> bool:
        """Whether `name` is bound outside the innermost run-time region (in an enclosing block of the kernel or
        in the Python scopes around it); False outside every region."""
        if not self.regions:
            return False
        for depth in range(len(self.scopes) - 1, -1, -1):
            if name in self.scopes[depth]:
                return depth < self.regions[-1].scope_depth
        return True

    def check_host_change(self, node: ast.AST, name: str, change: str) -> None:
        """Refuse `change` (a description of the statement) of the Python value bound to `name` when it was made
        outside the innermost run-time region: the parser runs the change once, while compiling, whereas the
        region runs any number of times (or none) when the kernel runs."""
        if self.made_outside_region(name):
            region = self.regions[-1].construct
            unroll = ", or unroll the loop while compiling with meta.range(...)" if region == RUN_TIME_LOOP else ""
            raise self.error(node, f"{change} inside {region}: '{name}' is a Python value, changed once while the "
                                   f"kernel compiles, not each time {region} runs. Keep values computed at run time "
                                   f"in kernel variables or tensors (e.g. register_tensor){unroll}", DSLSyntaxError)
