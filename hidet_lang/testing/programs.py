"""A hypothesis strategy that draws well-typed DSL kernels as Python source text, free of undefined behaviour.

``programs()`` draws a ``Program``: the body of a kernel over every scalar type (``i8``..``u64``, ``f16``,
``f32``, ``f64``) with arithmetic, comparisons, casts, ``min``/``max``/``abs``, a few math functions, nested
``for`` and ``while`` loops (with ``break``/``continue``) and ``if``/``else``, local arrays
(``register_tensor``), helper functions and task-mapping loops (``for i, j in spatial(...).on(w)``). Every
program has the same parameters::

    (xi: i64[8], xf: f64[8], oi: i64[W * N_OUT], of: f64[W * N_OUT])

reads its inputs from ``xi``/``xf`` and writes its results into ``oi`` (integers, converted to ``i64``) and
``of`` (floats, converted to ``f64``). The body runs once per worker ``w`` in ``range(W)``: as a loop on the CPU,
as the threads of one block in a CUDA kernel; worker ``w`` writes ``oi[w * N_OUT:...]`` and ``of[...]`` only.

Undefined behaviour in C is avoided by construction: the integer range of every expression is tracked, and ``+ - *
<<`` on ``i32``/``i64`` whose result may leave the type go through the unsigned type (``i32(u32(a) + u32(b))``,
which wraps as the DSL defines); divisors are guarded (``b if b != 0 else 1``, and ``-1`` too where the dividend may
be the type's minimum); shift amounts are masked to the width. A float converted to an integer type is clamped into
range only one time in three: otherwise the value is the program's own, scaled past the type's range, or a signed
zero, an infinity, NaN or ±3e9 (alone, which the frontend folds, or added to the value), since every target defines
that conversion (saturating, NaN to 0). Operands of different types are drawn (``u16 | i8``, ``f16 * u8``), so are
the float ``//`` and ``%`` (floored, as Python's). IEEE's corner cases are drawn often: float constants include
signed zeros, infinities and NaN, one float operation in four has such an operand, and each program ends with three
probes, two declarations that combine such a value with one of the program's values (an integer one converted:
``f32(0.0) - v`` is +0.0, not -0.0, for ``v = 0``), and one that converts a float value to an integer type
unclamped, before its outputs. The math functions of ``f32``/``f16`` are limited to correctly rounded ones
(``sqrt``, ``floor``, ``ceil``, ``abs``) so that every target computes the same bits; ``f64`` also gets ``exp``,
``log``, ``sin``, ``cos`` and ``tanh``, whose results agree within an ulp (``Program.uses_libm``: the C library
computes them at run time, but the C compiler evaluates a call on constants while compiling, correctly rounded).
``module_source`` puts many programs into one script module; ``load_module`` imports such a source from a temporary
file.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import tempfile
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

__all__ = ["N_INPUTS", "N_OUT", "Program", "load_module", "module_source", "programs"]

N_INPUTS = 8
"""Elements of each input array (``xi``, ``xf``)."""
N_OUT = 8
"""Integer (and float) outputs each worker writes."""

_INT_TYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
_FLOAT_TYPES = ("f16", "f32", "f64")
_BITS = {"8": 8, "16": 16, "32": 32, "64": 64}
_F64_MATH = ("exp", "log", "sin", "cos", "tanh")
_EXACT_MATH = ("sqrt", "floor", "ceil")
_FLOAT_CONSTANTS = (1.0, -1.0, 0.5, 2.0, -3.25, 100.0, 1e-3, 7.0, 0.0, -0.0, math.inf, -math.inf, math.nan)
_SPECIAL_OPERANDS = (0.0, 0.0, -0.0, -0.0, math.inf, -math.inf, math.nan)
"""Where IEEE arithmetic has its corner cases (`0.0 - x` is not `-x`: it is +0.0 for x = +0.0); a zero in four of
seven."""
_FLOAT_OPS = ("+", "-", "*", "/", "//", "%")
_CONVERSIONS = ("clamped", "plain", "scaled", "special", "special_sum")
"""How a float is converted to an integer type (`_Generator.convert`); "clamped" into range once in three."""
_CONVERSION_SCALES = (1e3, -1e5, 1e10, -1e10, 1e20, 1e300)
"""Factors that take a value past an integer type's range (past f16's and f32's, to an infinity)."""
_CONVERSION_SPECIALS = (*_SPECIAL_OPERANDS, 3e9, -3e9)


def _bits(t: str) -> int:
    return _BITS[t[1:]]


def _range(t: str) -> tuple[int, int]:
    n = _bits(t)
    return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if t[0] == "i" else (0, (1 << n) - 1)


def _promote(a: str, b: str) -> str:
    """C's usual conversions as the DSL states them (see ``hidet_lang.ir.types.promote``)."""
    if a == b:
        return a
    if a[0] == "f" or b[0] == "f":
        floats = [t for t in (a, b) if t[0] == "f"]
        return max(floats, key=_bits)
    if _bits(a) != _bits(b):
        return a if _bits(a) > _bits(b) else b
    return a if a[0] == "u" else b


Interval = tuple[int, int] | None  # the values an integer expression may take; None for floats


@dataclass
class _Scope:
    """What generated code may read: scalar variables and local arrays, with their types and ranges."""

    scalars: list[tuple[str, str, Interval]] = field(default_factory=list)
    arrays: list[tuple[str, str, tuple[int, ...], Interval]] = field(default_factory=list)
    loop_vars: list[tuple[str, int, int]] = field(default_factory=list)  # name, min, max
    inputs: bool = True  # whether xi and xf are visible (not in helper functions)

    def copy(self) -> _Scope:
        return _Scope(list(self.scalars), list(self.arrays), list(self.loop_vars), self.inputs)


@dataclass(frozen=True)
class Program:
    """One generated kernel: its body (one worker's work), helper functions and worker count.

    ``function_source(name, kind)`` is the text of the kernel (and its helpers) for the target kind ``kind``
    'cpu' or 'cuda', ready to stand inside a ``with hidet.script_module()`` block.
    """

    body: tuple[str, ...]
    helpers: tuple[tuple[str, ...], ...]
    workers: int

    @property
    def uses_libm(self) -> bool:
        """Whether the program calls a math function that is not correctly rounded (``exp log sin cos tanh``)."""
        lines = [*self.body, *(line for helper in self.helpers for line in helper)]
        return any(f"math.{fn}(" in line for fn in _F64_MATH for line in lines)

    def function_source(self, name: str, kind: str) -> str:
        """The helpers and the kernel called ``name`` for the target kind ``kind`` ('cpu' or 'cuda'), at
        indentation 4."""
        helper_kind = "cpu_internal" if kind == "cpu" else "cuda_internal"
        out: list[str] = []
        for helper in self.helpers:
            out += ["    @hidet.script"]
            out += ["    " + line.replace("HELPER", f"{name}_h").replace("KIND", helper_kind) for line in helper]
        body = [line.replace("HELPER", f"{name}_h") for line in self.body]  # HELPER<i> -> <name>_h<i>
        out += ["    @hidet.script",
                f"    def {name}(xi: i64[{N_INPUTS}], xf: f64[{N_INPUTS}], oi: i64[{self.workers * N_OUT}], "
                f"of: f64[{self.workers * N_OUT}]):"]
        if kind == "cpu":
            out += ["        attrs.func_kind = 'public'", f"        for w in range({self.workers}):"]
            out += ["            " + line for line in body]
        else:
            out += ["        attrs.func_kind = 'cuda_kernel'", "        attrs.cuda.grid_dim = 1",
                    f"        attrs.cuda.block_dim = {self.workers}", "        w = threadIdx.x"]
            out += ["        " + line for line in body]
        return "\n".join(out) + "\n"


_HEADER = """\
import math
import hidet_lang as hidet
from hidet_lang import attrs, register_tensor, repeat, spatial
from hidet_lang import f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from hidet_lang.cuda import threadIdx

with hidet.script_module() as module:
"""


def module_source(programs: list[Program], kind: str, prefix: str = "p") -> str:
    """The source of a Python module defining ``module``, a script module with ``programs`` as the kernels
    ``<prefix>0``, ``<prefix>1``, ... for the target kind ``kind`` ('cpu' or 'cuda')."""
    return _HEADER + "".join(p.function_source(f"{prefix}{i}", kind) for i, p in enumerate(programs))


def load_module(source: str, directory: str | None = None) -> Any:
    """Import ``source`` from a new file in ``directory`` (a temporary one by default) and return its
    ``module`` (``@hidet.script`` reads the source text, so generated kernels must live in a file)."""
    folder = Path(directory or tempfile.mkdtemp(prefix="hidet_fuzz_"))
    folder.mkdir(parents=True, exist_ok=True)
    name = f"fuzz_{uuid.uuid4().hex[:12]}"
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    py_module = importlib.util.module_from_spec(spec)
    sys.modules[name] = py_module
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # e.g. `1(x)` in a mutant: the DSL's error to report
            spec.loader.exec_module(py_module)
    finally:
        sys.modules.pop(name, None)
    return py_module.module


class _Generator:
    """Draws the statements of one program; ``draw`` is hypothesis's."""

    def __init__(self, draw: st.DrawFn, workers: int, max_depth: int) -> None:
        self.draw = draw
        self.workers = workers
        self.max_depth = max_depth
        self.names = 0
        self.helpers: list[tuple[str, ...]] = []
        self.helper_sigs: list[tuple[str, str, str, str]] = []  # name, a type, b type, return type

    def fresh(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}_{self.names}"

    def choice(self, options: Any) -> Any:
        return self.draw(st.sampled_from(list(options)))

    # ------------------------------------------------------------------------------------ expressions
    def const(self, t: str) -> tuple[str, Interval]:
        if t[0] == "f":
            return f"{t}({_float_literal(self.choice(_FLOAT_CONSTANTS))})", None
        lo, hi = _range(t)
        v = self.draw(st.one_of(st.just(0), st.integers(-4, 9).filter(lambda x: lo <= x <= hi),
                                st.sampled_from([lo, hi, lo + 1, hi - 1])))
        return f"{t}({v})", (v, v)

    def leaf(self, t: str, scope: _Scope) -> tuple[str, Interval]:
        options = ["const", "input"] if scope.inputs else ["const"]
        scalars = [s for s in scope.scalars if s[1] == t]
        arrays = [a for a in scope.arrays if a[1] == t]
        if scalars:
            options += ["var", "var"]
        if arrays:
            options += ["array"]
        if scope.loop_vars and t[0] != "f":
            options += ["loop"]
        kind = self.choice(options)
        if kind == "const":
            return self.const(t)
        if kind == "var":
            name, _, iv = self.choice(scalars)
            return name, iv
        if kind == "array":
            name, _, shape, iv = self.choice(arrays)
            return f"{name}[{', '.join(self.index(n, scope) for n in shape)}]", iv
        if kind == "loop":
            name, lo, hi = self.choice(scope.loop_vars)
            return f"{t}({name})", _fit((lo, hi), t) if t[0] == "i" or lo >= 0 else _range(t)
        k = self.draw(st.integers(0, N_INPUTS - 1))
        if t[0] == "f":
            return f"{t}(xf[{k}])", None
        narrow = self.choice([t, t, "i8", "u8", "i16"])
        if narrow != t and _bits(narrow) < _bits(t) and (t[0] == "i" or narrow[0] == "u"):
            return f"{t}({narrow}(xi[{k}]))", _range(narrow)
        return f"{t}(xi[{k}])", _range(t)

    def index(self, extent: int, scope: _Scope) -> str:
        fitting = [v for v in scope.loop_vars if 0 <= v[1] and v[2] < extent]
        if fitting and self.draw(st.booleans()):
            return self.choice(fitting)[0]
        return str(self.draw(st.integers(0, extent - 1)))

    def expr(self, t: str, scope: _Scope, depth: int) -> tuple[str, Interval]:
        if depth <= 0 or self.draw(st.integers(0, 3)) == 0:
            return self.leaf(t, scope)
        kinds = ["binary", "binary", "cast", "select", "minmax", "unary"]
        if self.helper_sigs and any(s[3] == t for s in self.helper_sigs):
            kinds += ["call", "call"]
        kind = self.choice(kinds)
        if kind == "cast":
            src = self.choice(_INT_TYPES + _FLOAT_TYPES)
            inner, iv = self.expr(src, scope, depth - 1)
            return self.convert(inner, iv, src, t)
        if kind == "select":
            cond = self.condition(scope, depth - 1)
            a, ia = self.expr(t, scope, depth - 1)
            b, ib = self.expr(t, scope, depth - 1)
            return f"({a} if {cond} else {b})", _hull(ia, ib)
        if kind == "minmax":
            a, ia = self.expr(t, scope, depth - 1)
            b, ib = self.expr(t, scope, depth - 1)
            return f"{self.choice(['min', 'max'])}({a}, {b})", _hull(ia, ib)
        if kind == "unary":
            return self.unary(t, scope, depth)
        if kind == "call":
            name, ta, tb, _ = self.choice([s for s in self.helper_sigs if s[3] == t])
            a, _ = self.expr(ta, scope, depth - 1)
            b, _ = self.expr(tb, scope, depth - 1)
            return f"{name}({a}, {b})", _range(t) if t[0] != "f" else None
        return self.binary(t, scope, depth)

    def unary(self, t: str, scope: _Scope, depth: int) -> tuple[str, Interval]:
        a, ia = self.expr(t, scope, depth - 1)
        if t[0] == "f":
            fn = self.choice(["-", "abs", *_EXACT_MATH, *(_F64_MATH if t == "f64" else ())])
            if fn == "-":
                return f"(-{a})", None
            if fn == "abs":
                return f"abs({a})", None
            return f"math.{fn}({a})", None
        fn = self.choice(["-", "not", "abs"] if t[0] == "i" else ["not", "-"])
        lo, hi = _range(t)
        ones = f"{t}({-1 if t[0] == 'i' else hi})"  # `~x` is the address of x in the DSL: not is `x ^ ones`
        assert ia is not None
        if fn == "abs" and t in ("i32", "i64") and ia[0] == lo:
            return a, ia
        if fn == "-" and t in ("i32", "i64") and ia[0] == lo:
            return f"({a} ^ {ones})", (-ia[1] - 1, -ia[0] - 1)
        if fn == "-":
            return f"(-{a})", _fit((-ia[1], -ia[0]), t)
        if fn == "abs":
            return f"abs({a})", _fit((0 if ia[0] <= 0 <= ia[1] else min(abs(ia[0]), abs(ia[1])),
                                      max(abs(ia[0]), abs(ia[1]))), t)
        return f"({a} ^ {ones})", _fit((-ia[1] - 1, -ia[0] - 1), t) if t[0] == "i" else _range(t)

    def binary(self, t: str, scope: _Scope, depth: int) -> tuple[str, Interval]:
        if t[0] == "f":
            op = self.choice(_FLOAT_OPS)
            a, _ = self.expr(t, scope, depth - 1)
            b, _ = self.expr(self.choice([t, t, *(u for u in _INT_TYPES + _FLOAT_TYPES if _promote(t, u) == t)]),
                             scope, depth - 1)
            if self.draw(st.integers(0, 3)) == 0:  # one operand in four is a signed zero, an infinity or NaN
                a, b = self.with_special(t, a, b)
            return f"({a} {op} {b})", None
        op = self.choice(["+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>"])
        # the right operand may have a different type whose promotion with t gives t
        tb = self.choice([u for u in _INT_TYPES if _promote(t, u) == t]) if op not in ("<<", ">>") else \
            self.choice(_INT_TYPES)
        a, ia = self.expr(t, scope, depth - 1)
        b, ib = self.expr(tb, scope, depth - 1)
        assert ia is not None and ib is not None
        lo, hi = _range(t)
        if op in ("<<", ">>"):
            mask = _bits(t) - 1
            shift = f"({b} & {tb}({mask}))"
            if op == ">>":
                return f"({a} >> {shift})", ((min(ia[0], 0), max(ia[1], 0)) if t[0] == "i" else (0, ia[1]))
            if t in ("i32", "i64"):
                u = "u" + t[1:]
                return f"{t}({u}({a}) << {shift})", _range(t)
            return f"({a} << {shift})", _range(t)
        if op in ("//", "%"):
            guard = f"({b} if {b} != {tb}(0) else {tb}(1))"
            if t in ("i32", "i64") and ia[0] == lo and ib[0] <= -1 <= ib[1] and tb[0] == "i":
                guard = f"({tb}(1) if {b} == {tb}(0) else ({tb}(1) if {b} == {tb}(-1) else {b}))"
            if op == "//":
                m = max(abs(ia[0]), abs(ia[1]))
                return f"({a} // {guard})", _fit((-m, m), t)
            m = max(abs(ib[0]), abs(ib[1]))
            return f"({a} % {guard})", _fit((-m, m), t) if t[0] == "i" else (0, m)
        if op in ("&", "|", "^"):
            return f"({a} {op} {b})", _range(t) if t[0] == "i" else (0, hi)
        candidates = {"+": [ia[0] + ib[0], ia[1] + ib[1]], "-": [ia[0] - ib[1], ia[1] - ib[0]],
                      "*": [x * y for x in ia for y in ib]}[op]
        result = (min(candidates), max(candidates))
        if lo <= result[0] and result[1] <= hi:
            return f"({a} {op} {b})", result
        if t in ("i32", "i64"):  # signed overflow is undefined in C: wrap through the unsigned type
            u = "u" + t[1:]
            return f"{t}({u}({a}) {op} {u}({b}))", _range(t)
        return f"({a} {op} {b})", _range(t)

    def with_special(self, t: str, a: str, b: str) -> tuple[str, str]:
        """The operands `a`, `b` of a float operation of type `t`, one of them replaced by a special value."""
        special = f"{t}({_float_literal(self.choice(_SPECIAL_OPERANDS))})"
        return (special, b) if self.draw(st.booleans()) else (a, special)

    def probe(self, scope: _Scope) -> list[str]:
        """A declaration of one float operation between a special value and a value the program computed (of any
        type: an integer is converted), in either order: IEEE's corner cases, where they reach an output."""
        t = self.choice(_FLOAT_TYPES)
        value, u = (self.leaf(t, scope)[0], t) if not scope.scalars else self.choice(scope.scalars)[:2]
        a, b = self.with_special(t, value, value)
        name, result = self.fresh("v"), _promote(t, u)
        scope.scalars.append((name, result, None))
        return [f"{name}: {result} = ({a} {self.choice(_FLOAT_OPS)} {b})"]

    def convert(self, inner: str, iv: Interval, src: str, dst: str) -> tuple[str, Interval]:
        if src[0] == "f" and dst[0] != "f":
            how = self.choice(("clamped", *_CONVERSIONS))
            if how == "clamped":
                lo, hi = (0, 200) if dst[0] == "u" else (-100, 100)
                return f"{dst}(min(max({inner}, {src}({float(lo)})), {src}({float(hi)})))", (lo, hi)
            return self.unclamped(inner, src, dst, how), _range(dst)
        if dst[0] == "f":
            return f"{dst}({inner})", None
        assert iv is not None
        return f"{dst}({inner})", _fit(iv, dst)

    def unclamped(self, inner: str, src: str, dst: str, how: str) -> str:
        """The float `inner` of type `src` converted to integer type `dst` as `how` (one of `_CONVERSIONS` but
        "clamped") says: as it is, scaled, or replaced by or added to a special value."""
        if how == "scaled":
            inner = f"({inner} * {src}({self.choice(_CONVERSION_SCALES)!r}))"
        elif how.startswith("special"):
            special = f"{src}({_float_literal(self.choice(_CONVERSION_SPECIALS))})"
            inner = special if how == "special" else f"({special} + {inner})"
        return f"{dst}({inner})"

    def conversion_probe(self, scope: _Scope) -> list[str]:
        """A declaration converting one of the program's float values (or an input) to an integer type, not clamped
        into range: where the conversion saturates or meets NaN, it reaches an output."""
        floats = [(name, t) for name, t, _ in scope.scalars if t[0] == "f"]
        src = self.choice(_FLOAT_TYPES)
        value, src = self.choice(floats) if floats and self.draw(st.booleans()) else (self.leaf(src, scope)[0], src)
        dst, name = self.choice(_INT_TYPES), self.fresh("v")
        scope.scalars.append((name, dst, _range(dst)))
        return [f"{name}: {dst} = {self.unclamped(value, src, dst, self.choice(_CONVERSIONS[1:]))}"]

    def condition(self, scope: _Scope, depth: int) -> str:
        t = self.choice(_INT_TYPES + _FLOAT_TYPES)
        a, _ = self.expr(t, scope, max(depth, 0))
        b, _ = self.expr(t, scope, max(depth - 1, 0))
        cond = f"{a} {self.choice(['<', '<=', '>', '>=', '==', '!='])} {b}"
        if self.draw(st.integers(0, 4)) == 0:
            c, _ = self.expr("i32", scope, 0)
            cond = f"({cond}) {self.choice(['and', 'or'])} {c} > i32(0)"
        return cond

    # ------------------------------------------------------------------------------------ statements
    def block(self, scope: _Scope, depth: int, budget: int) -> list[str]:
        lines: list[str] = []
        for _ in range(self.draw(st.integers(1, max(1, budget)))):
            lines += self.statement(scope, depth)
        return lines

    def statement(self, scope: _Scope, depth: int) -> list[str]:
        kinds = ["declare", "declare", "assign", "array"]
        if depth > 0:
            kinds += ["for", "if", "mapping", "while"]
        kind = self.choice(kinds)
        if kind == "assign":
            if scope.scalars:
                name, t, iv = self.choice(scope.scalars)
                value, viv = self.expr(t, scope, self.max_depth)
                if iv is None or (viv is not None and iv[0] <= viv[0] and viv[1] <= iv[1]):
                    return [f"{name} = {value}"]
                if t[0] != "f" and iv == _range(t) and (t[0] == "u" or t in ("i8", "i16")):
                    return [f"{name} {self.choice(['&=', '|=', '^='])} {value}"]
            kind = "declare"
        if kind == "declare":
            t = self.choice(_INT_TYPES + _FLOAT_TYPES)
            value, iv = self.expr(t, scope, self.max_depth)
            name = self.fresh("v")
            if iv is not None and self.draw(st.booleans()):
                iv = _range(t)  # allow later assignments of any value of the type
            scope.scalars.append((name, t, iv))
            if t[0] == "f" and self.draw(st.booleans()):
                return [f"{name}: {t} = {value}", f"{name} {self.choice(['+=', '-=', '*='])} {t}(0.5)"]
            return [f"{name}: {t} = {value}"]
        if kind == "array":
            t = self.choice(_INT_TYPES + _FLOAT_TYPES)
            shape = tuple(self.draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
            name, loops = self.fresh("a"), [self.fresh("i") for _ in shape]
            inner = scope.copy()
            inner.loop_vars += [(v, 0, n - 1) for v, n in zip(loops, shape)]
            value, iv = self.expr(t, inner, self.max_depth - 1)
            lines = [f"{name} = register_tensor({t}, [{', '.join(map(str, shape))}])"]
            for k, (v, n) in enumerate(zip(loops, shape)):
                lines.append("    " * k + f"for {v} in range({n}):")
            lines.append("    " * len(shape) + f"{name}[{', '.join(loops)}] = {value}")
            scope.arrays.append((name, t, shape, iv))
            return lines
        if kind == "for":
            v = self.fresh("i")
            start = self.draw(st.integers(-2, 2))
            step = self.choice([1, 1, 2, -1])
            stop = start + step * self.draw(st.integers(0, 4))
            inner = scope.copy()
            values = list(range(start, stop, step)) or [start]
            inner.loop_vars.append((v, min(values), max(values)))
            body = self.block(inner, depth - 1, 3)
            return [f"for {v} in range({start}, {stop}, {step}):", *("    " + b for b in body)]
        if kind == "while":  # the counter is read-only in the body and counts first: the loop ends
            counter, n = self.fresh("c"), self.draw(st.integers(0, 3))
            inner = scope.copy()
            inner.loop_vars.append((counter, 1, max(n, 1)))
            body = [f"{counter} = {counter} + i32(1)", *self.block(inner, depth - 1, 2)]
            if self.draw(st.booleans()):
                body += [f"if {self.condition(inner, 0)}:", f"    {self.choice(['break', 'continue'])}"]
            return [f"{counter}: i32 = i32(0)", f"while {counter} < i32({n}):", *("    " + b for b in body)]
        if kind == "if":
            cond = self.condition(scope, 1)
            then = self.block(scope.copy(), depth - 1, 2)
            lines = [f"if {cond}:", *("    " + b for b in then)]
            if self.draw(st.booleans()):
                lines += ["else:", *("    " + b for b in self.block(scope.copy(), depth - 1, 2))]
            return lines
        return self.mapping(scope, depth)

    def mapping(self, scope: _Scope, depth: int) -> list[str]:
        w = self.workers
        first = self.choice([d for d in (1, 2, 4) if w % d == 0])
        spatial_shape = (first, w // first)
        rep = (self.draw(st.integers(1, 2)), self.draw(st.integers(1, 2)))
        form = self.choice(["spatial", "spatial_repeat", "repeat_spatial"])
        text = {
            "spatial": f"spatial({spatial_shape[0]}, {spatial_shape[1]})",
            "spatial_repeat": f"spatial({spatial_shape[0]}, {spatial_shape[1]}).repeat({rep[0]}, {rep[1]})",
            "repeat_spatial": f"repeat({rep[0]}, {rep[1]}).spatial({spatial_shape[0]}, {spatial_shape[1]})",
        }[form]
        extents = (spatial_shape[0] * (1 if form == "spatial" else rep[0]),
                   spatial_shape[1] * (1 if form == "spatial" else rep[1]))
        vi, vj = self.fresh("m"), self.fresh("m")
        inner = scope.copy()
        inner.loop_vars += [(vi, 0, extents[0] - 1), (vj, 0, extents[1] - 1)]
        body = self.block(inner, depth - 1, 3)
        return [f"for {vi}, {vj} in {text}.on(w):", *("    " + b for b in body)]

    def helper(self) -> None:
        ta, tb = self.choice(_INT_TYPES + _FLOAT_TYPES), self.choice(_INT_TYPES + _FLOAT_TYPES)
        ret = self.choice(_INT_TYPES + _FLOAT_TYPES)
        scope = _Scope(scalars=[("a", ta, _range(ta) if ta[0] != "f" else None),
                                ("b", tb, _range(tb) if tb[0] != "f" else None)], inputs=False)
        value, _ = self.expr(ret, scope, 2)
        name = f"HELPER{len(self.helpers)}"  # Program.function_source names it after the kernel
        self.helpers.append((f"def {name}(a: {ta}, b: {tb}) -> {ret}:", "    attrs.func_kind = 'KIND'",
                             f"    return {value}"))
        self.helper_sigs.append((name, ta, tb, ret))

    def outputs(self, scope: _Scope) -> list[str]:
        ints = [(n, t) for n, t, _ in scope.scalars if t[0] != "f"]
        floats = [(n, t) for n, t, _ in scope.scalars if t[0] == "f"]
        for name, t, shape, _ in scope.arrays:
            target = floats if t[0] == "f" else ints
            target.append((f"{name}[{', '.join(str(n - 1) for n in shape)}]", t))
        lines = [f"oi[w * {N_OUT} + {k}] = i64({name})" for k, (name, _) in enumerate(ints[-N_OUT:])]
        lines += [f"of[w * {N_OUT} + {k}] = f64({name})" for k, (name, _) in enumerate(floats[-N_OUT:])]
        return lines


def _float_literal(v: float) -> str:
    """Python source for the float `v` (the generated module imports `math`)."""
    if math.isnan(v):
        return "math.nan"
    return repr(v) if math.isfinite(v) else f"{'-' if v < 0 else ''}math.inf"


def _hull(a: Interval, b: Interval) -> Interval:
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]))


def _fit(iv: tuple[int, int], t: str) -> tuple[int, int]:
    lo, hi = _range(t)
    return iv if lo <= iv[0] and iv[1] <= hi else (lo, hi)


@st.composite
def _programs(draw: st.DrawFn, max_depth: int, max_stmts: int, max_helpers: int) -> Program:
    workers = draw(st.sampled_from([1, 2, 4]))
    gen = _Generator(draw, workers, max_depth)
    for _ in range(draw(st.integers(0, max_helpers))):
        gen.helper()
    scope = _Scope(loop_vars=[("w", 0, workers - 1)])
    body = gen.block(scope, 2, max_stmts)
    for _ in range(2):
        body += gen.probe(scope)
    body += gen.conversion_probe(scope)
    body += gen.outputs(scope)
    return Program(body=tuple(body), helpers=tuple(gen.helpers), workers=workers)


def programs(max_depth: int = 3, max_stmts: int = 6, max_helpers: int = 2) -> st.SearchStrategy[Program]:
    """Well-typed kernels free of undefined behaviour (see the module docstring): expressions up to
    ``max_depth`` deep, up to ``max_stmts`` top-level statements, up to ``max_helpers`` helper functions."""
    return _programs(max_depth, max_stmts, max_helpers)
