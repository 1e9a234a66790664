"""Shape classes (what a tuning record is kept per) and the concrete sizes a binding is timed at.

A binding's shape class is its template, its options (dtype, ...) and its canonical sizes, each size known at
build time rounded up to a power of two (a winner for 100 rows serves 128 rows: tile shapes care about the order
of magnitude, and rounding keeps the records few), and each symbolic size written `?` (a build cannot know the
value it will run with, so every value of a symbolic size shares the record). For example
`stdlib_ops.templates.kernels.matmul_cpu:matmul_cpu[batch=1,m=?,n=256,k=512](dtype='float32')`.

A symbolic size is timed at the value the user gives for its dimension (`ops.tune(..., sizes={'batch': 64})`),
else at `REPRESENTATIVE_SIZE`.
"""

from __future__ import annotations

from collections.abc import Mapping

from hidet_lang.ir import expr as E
from hidet_lang.ir.evaluate import evaluate
from hidet_lang.ir.functor import collect
from stdlib_ops.templates.binding import TemplateBinding

REPRESENTATIVE_SIZE = 256
"""The value a symbolic dimension is timed at when the user gives none."""


def size_bucket(size: int) -> int:
    """`size` rounded up to a power of two."""
    return 1 << max(0, size - 1).bit_length()


def shape_class(binding: TemplateBinding) -> str:
    """The shape class of `binding` (see the module docstring)."""
    sizes = ",".join(f"{name}={size_bucket(d) if isinstance(d, int) else '?'}" for name, d in binding.sizes.items())
    options = ",".join(f"{name}={binding.options[name]!r}" for name in sorted(binding.options))
    return f"{binding.template_ref}[{sizes}]({options})"


def concrete_sizes(binding: TemplateBinding, values: Mapping[str, int]) -> dict[str, int]:
    """The template's sizes for `binding` when each symbolic dimension `name` is `values[name]` (default
    `REPRESENTATIVE_SIZE`); ValueError for a value below 1."""
    result = {}
    for name, d in binding.sizes.items():
        if isinstance(d, int):
            result[name] = d
            continue
        env = {}
        for var in {v.name: v for v in collect(d, E.Var)}.values():
            value = values.get(var.name, REPRESENTATIVE_SIZE)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"tune: the size of dimension '{var.name}' must be a positive int, got {value!r}")
            env[var] = value
        result[name] = int(evaluate(d, env))
    return result
