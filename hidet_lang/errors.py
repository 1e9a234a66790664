"""The DSL's exceptions.

Every error in a user's program is reported as `file:line:col: error: message`, followed by the offending
source line and a caret under the column. Tracebacks shown to users carry no frames of the compiler unless
`HIDET_LANG_DEBUG=1` is set.
"""

from __future__ import annotations

import linecache
import os

from hidet_lang.ir.span import Span


def debug_enabled() -> bool:
    """True when `HIDET_LANG_DEBUG` asks for the compiler's own frames in tracebacks."""
    return os.environ.get("HIDET_LANG_DEBUG", "") not in ("", "0")


def format_location(span: Span | None, message: str, kind: str = "error") -> str:
    """`file:line:col: error: message`, the source line and a caret (just the message without a span)."""
    if span is None:
        return message
    text = f"{span.file}:{span.line}:{span.col + 1}: {kind}: {message}"
    line = linecache.getline(span.file, span.line).rstrip("\n")
    if line:
        text += f"\n    {line}\n    {' ' * span.col}^"
    return text


class DSLError(Exception):
    """An error in a DSL program, located at the user's source line."""

    def __init__(self, message: str, span: Span | None = None) -> None:
        self.message = message
        self.span = span
        super().__init__(format_location(span, message))


class DSLSyntaxError(DSLError, SyntaxError):
    """A Python construct the DSL does not support, or one used where it cannot be."""

    def __str__(self) -> str:
        return self.args[0]


class DSLNameError(DSLError, NameError):
    """A name that is defined neither in the kernel nor in the enclosing Python scopes."""


class DSLTypeError(DSLError, TypeError):
    """A value of the wrong type for what the program does with it."""


class DSLValueError(DSLError, ValueError):
    """A value that has the right type but cannot be used (a bad extent, a static assertion that fails...)."""


class DSLAttributeError(DSLError, AttributeError):
    """An unknown attribute, e.g. a misspelt `attrs.func_kind`."""


class ConversionWarning(RuntimeWarning):
    """Checking mode: a float was converted to an integer type that cannot hold it (out of its range, infinite or
    NaN), at the DSL line the message names. The result is the defined one (saturated; NaN gives 0); the warning
    says the program relied on it. `warnings.simplefilter("error", ConversionWarning)` makes it an error."""


def without_compiler_frames(error: BaseException) -> BaseException:
    """`error` with the traceback cut, so that users see their own line, not the compiler's frames."""
    if debug_enabled():
        return error
    error.__traceback__ = None
    error.__cause__ = None
    error.__suppress_context__ = True
    return error
