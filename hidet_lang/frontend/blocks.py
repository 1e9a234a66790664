"""`with` blocks in kernels: `with <construct> as <name>:` hands the block to the construct it stands for, as a
`for` loop hands its loop to a `LoopConstruct`. The language's constructs live with their features (for example
`hidet_lang.cuda.contexts.warp_groups`)."""

from __future__ import annotations

import ast
from abc import ABC, abstractmethod
from typing import Any, Protocol

from hidet_lang.frontend.loops import ConstructBuilder
from hidet_lang.ir import stmt as S


class BlockBuilder(ConstructBuilder, Protocol):
    """What a block construct may ask of the parser."""

    def block(self, body: list[ast.stmt], bindings: dict[str, Any] | None = None,
              run_time: str | None = None) -> S.Stmt:
        """The parsed statements of `body` in a new scope holding `bindings` (`run_time` names a block that
        only some threads run, or that runs a number of times the parser does not know)."""


class BlockConstruct(ABC):
    """Something a kernel's `with` statement enters."""

    @abstractmethod
    def build(self, parser: BlockBuilder, node: ast.With, name: str | None) -> S.Stmt:
        """The IR of `with <self> as <name>: <node.body>` (`name` None without `as`); errors at `node`."""
