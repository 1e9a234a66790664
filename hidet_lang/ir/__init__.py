"""The IR: types, expressions, statements, functions, task mappings, the rewriter, printer and verifier.

Its modules are attributes of the package too, imported on first use (`hidet_lang.ir.module.IRModule`, as Hidet's
programs write `hidet.ir.module.IRModule`), so that `import hidet_lang.ir` loads none of them.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType


def __getattr__(name: str) -> ModuleType:
    """The module `hidet_lang.ir.<name>`, imported on first use; AttributeError when there is none."""
    if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")
