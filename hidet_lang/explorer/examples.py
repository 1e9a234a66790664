"""The example programs the page offers, each a script module or graph of its own with a numpy reference and the
sizes to run it at; their files live in `examples/` beside this module (package data)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).parent / "examples"


@dataclass(frozen=True)
class Example:
    """One example: its key, title, the file of its program and of its reference, its sizes and target."""

    key: str
    title: str
    sizes: str
    target: str = "cpu"

    def as_json(self) -> dict[str, Any]:
        """The example as the page loads it: the texts of both boxes and its settings."""
        return {"key": self.key, "title": self.title, "sizes": self.sizes, "target": self.target,
                "program": (FOLDER / f"{self.key}.py").read_text(),
                "reference": (FOLDER / f"{self.key}_reference.py").read_text()}


EXAMPLES = (
    Example("quick_start", "Quick start: a vector add on the CPU", "n=100000"),
    Example("tiled_matmul", "Tiled matmul on the CPU (a repeat mapping over a tile)", "m=96, n=80, k=64"),
    Example("softmax_mappings", "Softmax on CUDA with task mappings (a warp a row)", "rows=37, cols=200", "cuda"),
    Example("shared_memory", "CUDA matmul with shared-memory tiles", "m=64, n=48, k=40", "cuda"),
    Example("mlp_graph", "An MLP graph of stdlib_ops, fused", "batch=16"),
)


def example(key: str) -> Example:
    """The example called `key`; KeyError naming the examples otherwise."""
    for candidate in EXAMPLES:
        if candidate.key == key:
            return candidate
    raise KeyError(f"no example {key!r}; there are: {', '.join(e.key for e in EXAMPLES)}")
