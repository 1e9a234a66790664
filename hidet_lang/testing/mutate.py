"""Source mutations of script functions, for fuzzing the frontend: ``mutate(source, rng)``.

A mutation edits the body of one ``@hidet.script`` function of a module's source: it deletes, duplicates or
swaps statements, swaps a subexpression with another one of the function, changes a constant, a type name, an
operator, or the arguments of a ``range``/``spatial``/``repeat``. The result is Python source that may or may not
be a valid DSL program; what the frontend must do with it is ``hidet_lang.testing.frontend_fuzz``'s concern.
"""

from __future__ import annotations

import ast
import copy
import random
from collections.abc import Callable

from hidet_lang.frontend.python_ast import parse_python

__all__ = ["MUTATIONS", "mutate"]

_TYPES = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64", "bf16", "boolean", "int",
          "float", "math", "undefined_name", "spatial", "attrs", "xi"]
_CONSTANTS = [0, 1, -1, 2, 3, 7, 255, 2 ** 31, -(2 ** 31) - 1, 2 ** 63, 2 ** 64, 10 ** 30, 0.5, -2.5, 1e308,
              float("inf"), True, False, None, "text", (1, 2)]
_BINOPS = [ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift, ast.BitOr,
           ast.BitXor, ast.BitAnd, ast.MatMult]
_CMPOPS = [ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq, ast.Is, ast.In]


def _script_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
            and any(isinstance(d, ast.Attribute) and d.attr == "script" for d in n.decorator_list)]


def _bodies(func: ast.FunctionDef) -> list[list[ast.stmt]]:
    return [b for n in ast.walk(func) for b in (getattr(n, "body", None), getattr(n, "orelse", None))
            if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]


def _outside_body(func: ast.FunctionDef) -> set[int]:
    """The nodes of the decorators, parameters and return annotation: Python evaluates them itself when it
    runs the `def`, so they are not the DSL's input."""
    roots = [func.args, *func.decorator_list, *([func.returns] if func.returns else [])]
    return {id(n) for root in roots for n in ast.walk(root)}


def _exprs(func: ast.FunctionDef) -> list[ast.expr]:
    skip = _outside_body(func)
    return [n for n in ast.walk(func) if isinstance(n, ast.expr) and id(n) not in skip]


def _replace(func: ast.FunctionDef, old: ast.AST, new: ast.AST) -> bool:
    """Put ``new`` where ``old`` is in ``func`` (by identity); False when ``old`` is not a child of any node."""
    for parent in ast.walk(func):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return True
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return True
    return False


def _delete(func: ast.FunctionDef, rng: random.Random) -> bool:
    body = rng.choice(_bodies(func))
    del body[rng.randrange(len(body))]
    if not body:
        body.append(ast.Pass())
    return True


def _duplicate(func: ast.FunctionDef, rng: random.Random) -> bool:
    body = rng.choice(_bodies(func))
    i = rng.randrange(len(body))
    body.insert(rng.randrange(len(body) + 1), copy.deepcopy(body[i]))
    return True


def _swap_statements(func: ast.FunctionDef, rng: random.Random) -> bool:
    bodies = _bodies(func)
    a, b = rng.choice(bodies), rng.choice(bodies)
    i, j = rng.randrange(len(a)), rng.randrange(len(b))
    if a[i] is b[j] or any(n is b[j] for n in ast.walk(a[i])) or any(n is a[i] for n in ast.walk(b[j])):
        return False
    a[i], b[j] = b[j], a[i]
    return True


def _swap_expressions(func: ast.FunctionDef, rng: random.Random) -> bool:
    exprs = _exprs(func)
    if len(exprs) < 2:
        return False
    target, source = rng.sample(exprs, 2)
    return _replace(func, target, copy.deepcopy(source))


def _change_constant(func: ast.FunctionDef, rng: random.Random) -> bool:
    constants = [n for n in _exprs(func) if isinstance(n, ast.Constant)]
    if not constants:
        return False
    node = rng.choice(constants)
    node.value = rng.choice(_CONSTANTS)
    return True


def _change_name(func: ast.FunctionDef, rng: random.Random) -> bool:
    skip = _outside_body(func)
    names = [n for n in ast.walk(func) if isinstance(n, ast.Name) and id(n) not in skip]
    if not names:
        return False
    rng.choice(names).id = rng.choice(_TYPES)
    return True


def _change_operator(func: ast.FunctionDef, rng: random.Random) -> bool:
    ops = [n for n in ast.walk(func) if isinstance(n, (ast.BinOp, ast.AugAssign, ast.Compare))]
    if not ops:
        return False
    node = rng.choice(ops)
    if isinstance(node, ast.Compare):
        node.ops = [rng.choice(_CMPOPS)() for _ in node.ops]
    else:
        node.op = rng.choice(_BINOPS)()
    return True


def _change_call_arguments(func: ast.FunctionDef, rng: random.Random) -> bool:
    skip = _outside_body(func)
    calls = [n for n in ast.walk(func) if isinstance(n, ast.Call) and id(n) not in skip]
    if not calls:
        return False
    call = rng.choice(calls)
    action = rng.choice(["drop", "add", "constant"])
    if action == "drop" and call.args:
        del call.args[rng.randrange(len(call.args))]
    elif action == "add":
        call.args.append(ast.Constant(rng.choice(_CONSTANTS)))
    elif call.args:
        call.args[rng.randrange(len(call.args))] = ast.Constant(rng.choice(_CONSTANTS))
    return True


MUTATIONS: dict[str, Callable[[ast.FunctionDef, random.Random], bool]] = {
    "delete": _delete, "duplicate": _duplicate, "swap_statements": _swap_statements,
    "swap_expressions": _swap_expressions, "change_constant": _change_constant, "change_name": _change_name,
    "change_operator": _change_operator, "change_call_arguments": _change_call_arguments,
}
"""Each mutation edits a function in place and says whether it changed anything."""


def mutate(source: str, rng: random.Random, count: int = 1) -> tuple[str, list[str]]:
    """``source`` with ``count`` random mutations of its script functions' bodies, and the mutations' names."""
    tree = parse_python(source)
    functions = _script_functions(tree)
    applied: list[str] = []
    for _ in range(100):
        if len(applied) == count:
            break
        name = rng.choice(sorted(MUTATIONS))
        if MUTATIONS[name](rng.choice(functions), rng):
            applied.append(name)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n", applied
