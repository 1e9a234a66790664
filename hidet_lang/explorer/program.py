"""A user's program in the child process: written to a file of its own (so that the DSL reads its source and
errors name its lines), executed as a module, its values found, and any exception turned into a message at the
line of the box it came from."""

from __future__ import annotations

import re
import runpy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROGRAM_FILE = "program.py"
REFERENCE_FILE = "reference.py"


@dataclass(frozen=True)
class Located:
    """An error for the page: the message, the box it is in ('program' or 'reference', or '' when unknown), and
    its line and column there (0 when unknown)."""

    message: str
    box: str = ""
    line: int = 0
    col: int = 0

    def as_json(self) -> dict[str, Any]:
        """The error as the page receives it."""
        return {"message": self.message, "box": self.box, "line": self.line, "col": self.col}


class Workspace:
    """The folder of one job: the program and reference files, the IR dumps."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.program = folder / PROGRAM_FILE
        self.reference = folder / REFERENCE_FILE
        self.dumps = folder / "ir"

    def boxes(self) -> dict[str, str]:
        """Each file's path (as errors spell it) -> the box of the page it holds."""
        return {str(self.program): "program", str(self.reference): "reference"}

    def shorten(self, text: str) -> str:
        """`text` with this workspace's paths written as the bare file names the page shows."""
        return text.replace(str(self.folder) + "/", "")

    def execute(self, source: str, path: Path, init_globals: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write `source` to `path` and run it as a module (not as `__main__`); return its names."""
        path.write_text(source)
        sys.path.insert(0, str(self.folder))
        try:
            return runpy.run_path(str(path), init_globals=init_globals, run_name=path.stem)
        finally:
            sys.path.remove(str(self.folder))

    def locate(self, error: BaseException) -> Located:
        """`error` as the page shows it: its message with this workspace's paths shortened, at the line it names.

        The line is the first found of: a DSL error's span, a Python syntax error's line, a `file:line` of one of
        the boxes in the message (C compiler and checking-mode errors name the DSL line that way), the innermost
        frame of the traceback in one of the boxes."""
        boxes = self.boxes()
        message = self.shorten("".join(traceback.format_exception_only(type(error), error)).strip())
        span = getattr(error, "span", None)
        if span is not None and span.file in boxes:
            return Located(message, boxes[span.file], span.line, span.col + 1)
        if isinstance(error, SyntaxError) and error.filename in boxes:
            return Located(message, boxes[error.filename], error.lineno or 0, error.offset or 0)
        for path, box in boxes.items():
            match = re.search(re.escape(path) + r":(\d+)(?::(\d+))?", str(error))
            if match:
                return Located(message, box, int(match[1]), int(match[2] or 0))
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename in boxes]
        if frames:
            return Located(message, boxes[frames[-1].filename], frames[-1].lineno or 0, (frames[-1].colno or 0) + 1)
        return Located(message)
