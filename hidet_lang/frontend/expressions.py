"""Expressions other than operators and calls: names, constants, attributes, indexing, lambdas, comprehensions,
and type annotations.

An expression evaluates to a host value (a Python value, evaluated while parsing) or an IR expression.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from hidet_lang.errors import DSLAttributeError, DSLSyntaxError
from hidet_lang.frontend import builtins as B
from hidet_lang.frontend import semantics
from hidet_lang.frontend.core import ParserCore
from hidet_lang.frontend.loops import UnrolledLoop
from hidet_lang.frontend.python_ast import parse_python
from hidet_lang.ir import expr as E
from hidet_lang.ir.types import DataType, PointerType, TensorType, Type, VectorType


class ExpressionParser(ParserCore):
    """The parser's `expr_<Node>` methods for names, constants, attributes, subscripts, lambdas and
    comprehensions, and the evaluation of type annotations."""

    def expr_Constant(self, node: ast.Constant) -> Any:
        """A literal: its Python value."""
        return node.value

    def expr_Name(self, node: ast.Name) -> Any:
        """A kernel variable, or a value of the enclosing Python scopes."""
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        """A Python tuple of the elements' values."""
        return tuple(self.visit_expr(e) for e in node.elts)

    def expr_List(self, node: ast.List) -> list[Any]:
        """A Python list of the elements' values."""
        return [self.visit_expr(e) for e in node.elts]

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        """`owner.name` on a host value (`attrs` fields can be set, not read), and a tensor's `.shape`."""
        owner = self.visit_expr(node.value)
        if node.attr == "shape" and isinstance(owner, E.Expr) and isinstance(owner.type, TensorType):
            return tuple(owner.type.shape)  # a tensor's sizes (ints, or the parameters of `f32[n]`), as a host tuple
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

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        """`x[...]`: an element of a tensor, a row of one (`a[i, :]`, or `a[i]` with fewer indices than
        dimensions, so that `a[i][j]` is `a[i, j]`), or an item or slice of a host value (`shape[1:]`)."""
        base = self.visit_expr(node.value)
        if not isinstance(base, E.Expr):
            if not hasattr(type(base), "__getitem__"):
                raise self.error(node, f"{semantics.describe(base)} cannot be indexed")
            index = self.visit_expr(node.slice)
            if isinstance(base, DataType) and isinstance(index, list):
                index = tuple(index)
            return self.host_call(node, operator.getitem, base, index)
        if _has_slice(node):
            return self.tensor_slice(node, base)
        indices = self.subscript_indices(node)
        tensor = _tensor_type(base)
        if tensor is not None and 0 < len(indices) < len(tensor.shape):
            return self.sub_tensor(node, base, tensor, indices)
        return self.host_call(node, semantics.element, base, indices)

    def expr_Slice(self, node: ast.Slice) -> slice:
        """`lower:upper:step` in a subscript of a host value (`shape[:axis]`, `indices[1:]`): a Python slice,
        whose bounds are Python values while parsing."""
        bounds = [None if part is None else self.visit_expr(part) for part in (node.lower, node.upper, node.step)]
        if any(isinstance(b, E.Expr) for b in bounds):
            raise self.error(node, "the bounds of a slice of a Python list or tuple must be Python values while "
                                   "compiling, not kernel values", DSLSyntaxError)
        return slice(*bounds)

    def subscript_indices(self, node: ast.Subscript) -> tuple[Any, ...]:
        """The indices of `x[...]`: `x[i, j]`, or a host list or tuple of them (`x[indices]`, as in Hidet)."""
        if _has_slice(node):
            raise self.error(node, "slices of tensors are not supported here; index each element", DSLSyntaxError)
        value = self.visit_expr(node.slice)
        return tuple(value) if isinstance(value, (tuple, list)) else (value,)

    def tensor_slice(self, node: ast.Subscript, base: E.Expr) -> E.Expr:
        """`a[i, :]`: leading indices then whole trailing dimensions, as a pointer to that contiguous sub-tensor
        (what a function taking a tensor parameter accepts)."""
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        first = next(k for k, p in enumerate(parts) if isinstance(p, ast.Slice))
        rest = parts[first:]
        if any(not isinstance(p, ast.Slice) or p.lower or p.upper or p.step for p in rest):
            raise self.error(node, "a tensor slice takes leading indices followed by whole dimensions only, e.g. "
                                   "a[i, :] (a contiguous part of the tensor)", DSLSyntaxError)
        tensor = _tensor_type(base)
        if tensor is None or len(parts) != len(tensor.shape):
            raise self.error(node, f"{semantics.describe(base)} cannot be sliced with {len(parts)} dimension(s)")
        return self.sub_tensor(node, base, tensor, tuple(self.visit_expr(p) for p in parts[:first]))

    def sub_tensor(self, node: ast.Subscript, base: E.Expr, tensor: TensorType, leading: tuple[Any, ...]) -> E.Expr:
        """The part of `base` (of type `tensor`) at the `leading` indices, whole in its other dimensions: a pointer
        to that contiguous sub-tensor, which can be indexed, stored into and passed as a tensor argument."""
        if getattr(tensor, "layout", None) is not None:
            raise self.error(node, f"a tensor with a layout ({tensor}) cannot be sliced or partly indexed; index all "
                                   f"its {len(tensor.shape)} dimensions at once, e.g. a[i, j]", DSLSyntaxError)
        indices = leading + (0,) * (len(tensor.shape) - len(leading))
        element = self.host_call(node, semantics.element, base, indices)
        rest = tuple(tensor.shape[len(leading):])
        return E.Reinterpret(E.Address(element), PointerType(TensorType(tensor.dtype, rest)))

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

    def expr_ListComp(self, node: ast.ListComp) -> list[Any]:
        """`[f(x) for x in values]`, expanded while parsing."""
        return self.comprehension(node)

    def expr_GeneratorExp(self, node: ast.GeneratorExp) -> tuple[Any, ...]:
        """`(f(x) for x in values)`, expanded while parsing into a tuple."""
        return tuple(self.comprehension(node))

    def expr_Dict(self, node: ast.Dict) -> dict[Any, Any]:
        """`{k: v, ...}`, a host dict whose keys are Python values while parsing."""
        if any(k is None for k in node.keys):
            raise self.error(node, "`**` in a dict literal is not supported in a kernel", DSLSyntaxError)
        return self.host_dict([(k, self.visit_expr(k), self.visit_expr(v)) for k, v in zip(node.keys, node.values)])

    def expr_DictComp(self, node: ast.DictComp) -> dict[Any, Any]:
        """`{k: f(x) for x in values}`, expanded while parsing; the keys are Python values."""
        return self.host_dict(self.comprehension(
            node, lambda: (node.key, self.visit_expr(node.key), self.visit_expr(node.value))))

    def host_dict(self, items: list[tuple[ast.expr, Any, Any]]) -> dict[Any, Any]:
        """The dict of `(key node, key, value)` items; an error at a key that is not a Python value."""
        for key_node, key, _ in items:
            if isinstance(key, E.Expr):
                raise self.error(key_node, "a dict's keys in a kernel must be Python values while parsing")
        return {key: value for _, key, value in items}

    def comprehension(self, node: ast.ListComp | ast.GeneratorExp | ast.DictComp,
                      element: Callable[[], Any] | None = None) -> list[Any]:
        """The elements of a comprehension or generator over Python values, expanded while parsing (each made by
        `element`, by default the value of `node.elt`)."""
        results: list[Any] = []
        make = element or (lambda: self.visit_expr(node.elt))

        def expand(k: int) -> None:
            if k == len(node.generators):
                results.append(make())
                return
            generator = node.generators[k]
            iterable = self.visit_expr(generator.iter)
            if isinstance(iterable, UnrolledLoop):
                iterable = iterable.values
            if isinstance(iterable, E.Expr) or not hasattr(iterable, "__iter__"):
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

    def annotation_type(self, node: ast.expr) -> Type:
        """Evaluate a type annotation (strings too, for `from __future__ import annotations`)."""
        return self.as_type(node, self.annotation_value(node))

    def annotation_value(self, node: ast.expr) -> Any:
        """The value of an annotation, parsed first when it is a string."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                inner = parse_python(node.value, mode="eval").body
            except SyntaxError:
                raise self.error(node, f"cannot parse the annotation {node.value!r}", DSLSyntaxError) from None
            ast.copy_location(inner, node)
            for n in ast.walk(inner):
                n.lineno, n.col_offset = node.lineno, node.col_offset
            node = inner
        return self.visit_expr(node)

    def as_type(self, node: ast.expr, value: Any) -> Type:
        """The type an annotation's value names (a DSL type, a dtype name, or Python's int, float or bool)."""
        if isinstance(value, type) and value in B.PYTHON_CASTS:
            return B._as_dtype(B.PYTHON_CASTS[value])
        if isinstance(value, str):
            try:
                return B._as_dtype(value)
            except ValueError as e:
                raise self.error(node, str(e)) from None
        if isinstance(value, (DataType, TensorType, PointerType, VectorType)):
            return value
        raise self.error(node, f"{ast.unparse(node)} is not a type; write e.g. f32, i32, f32[16, 16], ~f32 or f32x8")


def _tensor_type(base: E.Expr) -> TensorType | None:
    """The tensor type of a tensor, or of what a pointer to a tensor points to; None for other values."""
    t = base.type
    if isinstance(t, PointerType):
        t = t.base
    return t if isinstance(t, TensorType) else None


def _has_slice(node: ast.Subscript) -> bool:
    """Whether `x[...]` has a slice among its indices (`a[i, :]`)."""
    sl = node.slice
    return isinstance(sl, ast.Slice) or (isinstance(sl, ast.Tuple) and any(isinstance(e, ast.Slice) for e in sl.elts))
