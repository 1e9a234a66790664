"""Assignments: `x = value`, tuple unpacking, declarations (`acc: f32 = 0.0`), `+=` and friends, stores to
tensor elements, and the function attributes set through `attrs`.

Tuple assignment reads every right-hand value before it stores any (`a, b = b, a` swaps). Assigning to a new
name declares a variable (or a local tensor, for `register_tensor(...)`); assigning a host value binds the
name to it while parsing.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from hidet_lang.cuda_limits import MAX_CLUSTER_SIZE
from hidet_lang.errors import DSLAttributeError, DSLSyntaxError, DSLTypeError, DSLValueError
from hidet_lang.frontend import builtins as B
from hidet_lang.frontend import semantics
from hidet_lang.frontend.expressions import ExpressionParser
from hidet_lang.frontend.operators import OperatorParser
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import FUNC_KINDS, FuncKind
from hidet_lang.ir.types import DataType, PointerType, TensorType, VectorType


class AssignmentParser(ExpressionParser, OperatorParser):
    """The parser's `visit_Assign`, `visit_AnnAssign` and `visit_AugAssign`, and the stores they make."""

    def visit_Assign(self, node: ast.Assign) -> None:
        """`target = value` (also `a = b = value` and `a, b = b, a`)."""
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
        if not isinstance(value.type, (DataType, PointerType, VectorType)):
            return value
        tmp = E.Var(self.fresh_name("tmp"), value.type)
        self.emit(S.DeclareStmt(tmp, value))
        return tmp

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        """`name: type` or `name: type = value`: a declaration."""
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
        """`target op= value`, as `target = target op value`."""
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
            self.store_element(target, self.visit_expr(target.value), self.subscript_indices(target), value)
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
            if existing in self.inferred:
                self.host_call(node, semantics.check_inferred_store, existing, value, self.inferred[existing].line)
            converted = self.host_call(node, semantics.assignable, existing.type, value, f"'{name}'")
            self.emit(S.AssignStmt(existing, converted))
            return
        if existing is not None and existing is not value:
            self.check_host_change(node, name, f"assigning to '{name}'")
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
            self.inferred[var] = self.span(node)
        else:
            self.bind(name, value)  # a host value: a mapping, a tuple, a function...
            return
        self.bind(name, var)

    def set_attr(self, owner: B._AttrsNamespace, attr: str, value: Any, node: ast.AST) -> None:
        """`attrs.<attr> = value` or `attrs.cuda.<attr> = value`."""
        assert self.ctx is not None
        if attr not in owner.names:
            valid = ", ".join(f"{owner.prefix}{n}" for n in owner.names)
            raise self.error(node, f"unknown attribute '{owner.prefix}{attr}'; valid attributes: {valid}",
                             DSLAttributeError)
        if owner is B.attrs and attr == "func_kind":
            if value not in FUNC_KINDS:
                kinds = ", ".join(repr(k.value) for k in FUNC_KINDS)
                raise self.error(node, f"func_kind must be one of {kinds}, got {value!r}", DSLValueError)
            self.ctx.kind = FuncKind(value)
        elif owner is B.attrs and attr == "func_name":
            if not isinstance(value, str) or not value.isidentifier():
                raise self.error(node, f"func_name must be an identifier, got {value!r}", DSLValueError)
            self.ctx.name = value
        elif owner is B.attrs and attr in ("noinline", "fast_math", "no_alias"):
            if not isinstance(value, bool):
                raise self.error(node, f"{attr} must be True or False, got {value!r}", DSLValueError)
            setattr(self.ctx, attr, value)
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
            return self.launch_integer(attr, value, node)
        if attr == "cluster_dim":
            return self.cluster_dims(value, node)
        dims = value if isinstance(value, (tuple, list)) else (value,)
        if not 1 <= len(dims) <= 3:
            raise self.error(node, f"{attr} has 1 to 3 dimensions, got {len(dims)}", DSLValueError)
        return tuple(self.launch_integer(attr, d, node) for d in dims)

    def cluster_dims(self, value: Any, node: ast.AST) -> tuple[int, ...]:
        """`attrs.cuda.cluster_dim`: 1 to 3 positive Python ints of at most `MAX_CLUSTER_SIZE` blocks in all."""
        dims = value if isinstance(value, (tuple, list)) else (value,)
        if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1
                                              for d in dims):
            raise self.error(node, f"cluster_dim takes 1 to 3 positive Python ints (a compile-time cluster shape), "
                                   f"got {value!r}", DSLValueError)
        if math.prod(dims) > MAX_CLUSTER_SIZE:
            raise self.error(node, f"cluster_dim {tuple(dims)} has {math.prod(dims)} blocks; a cluster has at most "
                                   f"{MAX_CLUSTER_SIZE}", DSLValueError)
        return tuple(dims)

    def launch_integer(self, attr: str, value: Any, node: ast.AST) -> E.Expr:
        """One integer of a launch configuration, as an IR expression (a float or a bool is refused)."""
        converted = None if isinstance(value, (bool, float)) else self.host_call(node, E.convert, value)
        t = converted.type if converted is not None else None
        if not (isinstance(t, DataType) and t.is_integer):
            raise self.error(node, f"attrs.cuda.{attr} takes integers, got {value!r}", DSLTypeError)
        return converted
