"""Where the language finds its compiler: `ScriptModule.build` calls the builder installed here.

The language layer imports nothing of the code generator; the package facade (`hidet_lang/__init__.py`) installs
`codegen.build.build_module` here, lazily, so that `import hidet_lang` (and `hidet_lang.ir`) loads no compiler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Builder = Callable[..., Any]
"""`builder(ir_module, target, **options)`: the compiled module."""

_builder: Builder | None = None


def install_builder(builder: Builder) -> None:
    """Make `builder` the compiler that `ScriptModule.build` uses."""
    global _builder
    _builder = builder


def installed_builder() -> Builder:
    """The installed builder; RuntimeError when there is none."""
    if _builder is None:
        raise RuntimeError("no code generator is installed; build through `import hidet_lang`")
    return _builder
