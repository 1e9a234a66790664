"""The torch operations the `torch.compile` backend converts, read from the conversion table (`torch_ops`) and
rendered as the README lists them: `python -m stdlib_ops.frontends.torch_supported` prints the list.

Each callable of the table is named where a user calls it (its public names in `NAMESPACES`: `F.gelu` is
`torch.nn.functional.gelu`, not `torch._C._nn.gelu`); callables whose only names are private are left out (torch's usage
log, which is no user operation, and `torch._weight_norm`, which `nn.utils.weight_norm` calls). Tensor methods are
listed under `Tensor`, modules under their module."""

from __future__ import annotations

import builtins
import operator
import textwrap
from types import ModuleType

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own alias

from stdlib_ops.frontends import torch_ops

NAMESPACES: tuple[tuple[str, ModuleType], ...] = (
    ("torch", torch), ("torch.nn.functional", F), ("torch.special", torch.special), ("operator", operator),
    ("builtins", builtins))
"""Where converted callables are looked for, in the order they are listed."""


def supported_operations() -> dict[str, list[str]]:
    """The operations the table converts, by namespace (those of `NAMESPACES` with any, then `Tensor` for the
    methods, then `torch.nn` for the modules), each namespace's names sorted. A callable is listed under every
    namespace that holds it under a public name (`torch.conv2d` is `F.conv2d`)."""
    converted = {id(target) for target in torch_ops.FUNCTIONS}
    found: dict[str, list[str]] = {}
    for prefix, namespace in NAMESPACES:
        found[prefix] = [name for name, value in vars(namespace).items()
                         if not name.startswith("_") and id(value) in converted]
    found["Tensor"] = list(torch_ops.METHODS)
    found["torch.nn"] = [t.__name__ for t in torch_ops.MODULES]
    return {prefix: sorted(set(names), key=_order) for prefix, names in found.items() if names}


def _order(name: str) -> tuple[bool, str]:
    """Plain names first, then the dunder methods (`__add__`), each alphabetically."""
    return name.startswith("__"), name


def markdown(width: int = 120) -> str:
    """The supported operations as a markdown list, one item a namespace with its count, wrapped at `width`."""
    lines = []
    for prefix, names in supported_operations().items():
        item = f"- `{prefix}` ({len(names)}): " + ", ".join(f"`{name}`" for name in names)
        lines.extend(textwrap.wrap(item, width, subsequent_indent="  ", break_long_words=False,
                                   break_on_hyphens=False))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
