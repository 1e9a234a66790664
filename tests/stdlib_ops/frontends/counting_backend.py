"""What the torch.compile tests share: the backend, counting the graphs it compiles."""

from __future__ import annotations

from typing import Any

from stdlib_ops.frontends.torch_backend import hidet_lang_backend


class Counting:
    """The backend, counting the graphs it compiles (a program that Dynamo ran eagerly instead would count none)
    and keeping the last compiled callable."""

    def __init__(self) -> None:
        self.graphs = 0
        self.last: Any = None

    def __call__(self, gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        self.graphs += 1
        self.last = hidet_lang_backend(gm, example_inputs, **kwargs)
        return self.last
