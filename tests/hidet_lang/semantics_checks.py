"""Shared check of the test_semantics_* files: a bad program raises a DSL error at the line marked `# ERROR`."""

import os
import re
from collections.abc import Callable

import pytest
from test_errors import compiler_frames, marked_line

from hidet_lang.errors import DSLError


def assert_error_at_marker(factory: Callable[[], object], cls: type[DSLError], message: str,
                           run: Callable[[], object] | None = None) -> DSLError:
    """`factory()` (or `run()`, which calls it and builds) raises `cls` naming the line marked `# ERROR` in
    `factory`, with `message` in its text and no frames of the compiler; returns the error."""
    with pytest.raises(cls) as excinfo:
        (run or factory)()
    error = excinfo.value
    header = str(error).split("\n")[0]
    m = re.match(r"(?P<file>.+):(?P<line>\d+):(?P<col>\d+): error: (?P<message>.*)$", header)
    assert m is not None, str(error)
    line, _, _ = marked_line(factory)
    assert os.path.samefile(m["file"], factory.__code__.co_filename)
    assert int(m["line"]) == line, f"the error names line {m['line']}, the marked line is {line}:\n{error}"
    assert message in m["message"], m["message"]
    assert compiler_frames(error) == []
    return error
