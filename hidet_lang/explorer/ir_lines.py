"""The DSL line of every line of a module's IR text at each lowering step: the IR printed as the dumps print it,
with the span of the statement (or function) each printed line belongs to."""

from __future__ import annotations

from typing import Any

from hidet_lang.ir.func import Function, IRModule
from hidet_lang.ir.printer import IRPrinter
from hidet_lang.passes.pipeline import STEPS


class SpanPrinter(IRPrinter):
    """The IR printer, noting for each line it prints the line of `filename` its statement came from."""

    def __init__(self, filename: str) -> None:
        super().__init__()
        self.filename = filename
        self.dsl_lines: list[int | None] = []
        self.current: int | None = None

    def line(self, text: str) -> None:
        """Print a line, and note the DSL line of the statement being printed."""
        super().line(text)
        self.dsl_lines.append(self.current)

    def _within(self, node: Any, print_node: Any) -> None:
        saved = self.current
        span = node.span
        if span is not None and span.file.endswith(self.filename):
            self.current = span.line
        print_node(node)
        self.current = saved

    def stmt(self, s: Any) -> None:
        """Print a statement under its own span."""
        self._within(s, super().stmt)

    def function(self, f: Function) -> None:
        """Print a function under its own span."""
        self._within(f, super().function)


def module_lines(module: IRModule, filename: str) -> list[int | None]:
    """The DSL line of each line of `str(module)`, as `hidet_lang.ir.printer.to_text` lays it out."""
    printer = SpanPrinter(filename)
    for i, function in enumerate(module.functions):
        if i:
            printer.lines.append("")
            printer.dsl_lines.append(None)
        printer.function(function)
    return printer.dsl_lines


def step_lines(module: IRModule, target: Any, filename: str) -> dict[str, list[int | None]]:
    """For the parsed module and after each step of the pipeline (`STEPS`, named as the IR dumps name them), the
    DSL line of each line of the IR's text."""
    lines = {"00_parsed": module_lines(module, filename)}
    for number, (name, step, _) in enumerate(STEPS, start=1):
        module = step(module, target)
        lines[f"{number:02d}_{name}"] = module_lines(module, filename)
    return lines
