"""Names a package gives on first use: a module `__getattr__` that imports each name's home when it is first
looked up (and keeps the value in the package's namespace, so later lookups cost nothing), and a `__dir__` that
lists them. The package facades (`hidet_lang`, `codegen` and its parts) use it, so that importing one module of a
package does not load all of it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

Homes = Mapping[str, tuple[str, str]]
"""name -> (module, attribute): where each name lives."""


def homes_of(module: str, *names: str) -> dict[str, tuple[str, str]]:
    """`names`, each living in `module` under its own name."""
    return {name: (module, name) for name in names}


def lazy_attributes(package: str, homes: Homes) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package` (its `__name__`) giving the names of `homes` (`__dir__` lists
    them and the package's `__all__`); other names are an AttributeError, as Python raises it."""

    def __getattr__(name: str) -> Any:
        try:
            module, attribute = homes[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), attribute)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*homes, *getattr(sys.modules[package], "__all__", ())})

    return __getattr__, __dir__
