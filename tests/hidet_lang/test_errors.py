"""Bad DSL programs: each is a Python exception at the offending line, with no frames of the compiler.

Every bad kernel is defined by a factory function; its offending line carries the marker comment `# ERROR`,
and the test computes that line's number from the factory's source to compare with the one the error names.
"""

import inspect
import os
import re
import traceback
from collections.abc import Callable

import pytest

import hidet_lang as hidet
from hidet_lang import attrs, f32, grid, i32, meta
from hidet_lang.errors import DSLAttributeError, DSLError, DSLNameError, DSLSyntaxError, DSLTypeError, DSLValueError

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPILER_DIRS = tuple(os.path.join(_ROOT, *d.split("/")) + os.sep
                      for d in ("hidet_lang/frontend", "hidet_lang/passes", "hidet_lang/ir", "codegen"))
# The public functions a user calls. Python records the frame of the function that raises, so the error
# leaves through one frame of the entry point itself (`script` or `build`), never through the parser's.
ENTRY_POINTS = {("script.py", "script"), ("script.py", "build")}


def bad_with() -> None:
    @hidet.script
    def k(a: f32[4]):
        with a:  # ERROR
            a[0] = 1.0


def bad_try() -> None:
    @hidet.script
    def k(a: f32[4]):
        a[1] = 2.0
        try:  # ERROR
            a[0] = 1.0
        except ValueError:
            pass


def bad_yield() -> None:
    @hidet.script
    def k(a: f32[4]):
        for i in range(4):
            yield a[i]  # ERROR


def bad_global() -> None:
    @hidet.script
    def k(a: f32[4]):
        global SOMETHING  # ERROR
        a[0] = 1.0


def bad_del() -> None:
    @hidet.script
    def k(a: f32[4]):
        x = a[0]
        del x  # ERROR


def bad_set() -> None:
    @hidet.script
    def k(a: f32[4]):
        s = {1, 2}  # ERROR
        a[0] = s


def bad_undefined() -> None:
    @hidet.script
    def k(a: f32[4]):
        a[0] = 1.0
        a[1] = not_defined_anywhere * 2.0  # ERROR  # noqa: F821


def bad_pointer_to_float() -> None:
    @hidet.script
    def k(a: f32[4], p: ~f32):
        x = 1.0
        x = p  # ERROR
        a[0] = x


def bad_one_index() -> None:
    @hidet.script
    def k(a: f32[4, 4]):
        for i in range(4):
            a[i] = 0.0  # ERROR


def bad_one_index_read() -> None:
    @hidet.script
    def k(a: f32[4, 4], b: f32[4]):
        b[0] = a[1] + 1.0  # ERROR


def bad_attr() -> None:
    @hidet.script
    def k(a: f32[4]):
        attrs.func_knd = "public"  # ERROR
        a[0] = 1.0


def bad_noinline() -> None:
    @hidet.script
    def k(a: f32[4]):
        attrs.noinline = 1  # ERROR
        a[0] = 1.0


def bad_fast_math() -> None:
    @hidet.script
    def k(a: f32[4]):
        attrs.fast_math = "yes"  # ERROR
        a[0] = 1.0


def bad_continue_unrolled() -> None:
    @hidet.script
    def k(a: f32[4]):
        for i in meta.range(4):
            if a[i] > 0.0:
                continue  # ERROR


def bad_print() -> None:
    @hidet.script
    def k(a: f32[4]):
        print(a[0])  # ERROR


def bad_static_assert() -> None:
    size = 3

    @hidet.script
    def k(a: f32[4]):
        assert size % 2 == 0, "size must be even"  # ERROR
        a[0] = 1.0


def bad_callee_arguments() -> None:
    @hidet.script
    def callee(x: f32, y: f32) -> f32:
        return x + y

    @hidet.script
    def k(a: f32[4]):
        a[0] = callee(a[1])  # ERROR


def bad_callee_tensor() -> None:
    @hidet.script
    def callee(x: f32[8]) -> f32:
        return x[0]

    @hidet.script
    def k(a: f32[4]):
        a[0] = callee(a)  # ERROR


def bad_pointer_dtype() -> None:
    @hidet.script
    def k(a: i32[4], b: f32[4]):
        p: ~f32 = a  # ERROR
        b[0] = p[0]


def bad_return_value() -> None:
    @hidet.script
    def k(a: f32[4]) -> f32:
        return "abc"  # ERROR


def bad_grid_extent() -> None:
    @hidet.script
    def k(a: f32[4]):
        for i in grid("a"):  # ERROR
            a[i] = 1.0


def bad_func_kind() -> None:
    @hidet.script
    def k(a: f32[4]):
        attrs.func_kind = "publik"  # ERROR
        a[0] = 1.0


CASES: list[tuple[Callable[[], None], type[Exception], str]] = [
    (bad_func_kind, DSLValueError,
     "func_kind must be one of 'public', 'cpu_kernel', 'cpu_internal', 'cuda_kernel', 'cuda_internal', got 'publik'"),
    (bad_return_value, DSLTypeError, "cannot use a str"),
    (bad_grid_extent, DSLTypeError, "cannot use a str"),
    (bad_with, DSLTypeError, "a `with` statement in a kernel enters a block construct such as warp_groups"),
    (bad_try, DSLSyntaxError, "a `try` statement is not supported"),
    (bad_yield, DSLSyntaxError, "`yield` is not supported"),
    (bad_global, DSLSyntaxError, "a `global` statement is not supported"),
    (bad_del, DSLSyntaxError, "a `del` statement is not supported"),
    (bad_set, DSLSyntaxError, "a set literal is not supported"),
    (bad_undefined, DSLNameError, "name 'not_defined_anywhere' is not defined"),
    (bad_pointer_to_float, DSLTypeError, "cannot assign a pointer (~f32) to 'x' of type f32"),
    (bad_one_index, DSLTypeError, "'a' has 2 dimensions (f32[4, 4]) but is indexed with 1 index"),
    (bad_one_index_read, DSLTypeError, "is a part of a tensor"),
    (bad_attr, DSLAttributeError,
     "unknown attribute 'attrs.func_knd'; valid attributes: attrs.func_kind, attrs.func_name, attrs.noinline, "
     "attrs.fast_math, attrs.no_alias, attrs.cuda"),
    (bad_noinline, DSLValueError, "noinline must be True or False, got 1"),
    (bad_fast_math, DSLValueError, "fast_math must be True or False, got 'yes'"),
    (bad_continue_unrolled, DSLSyntaxError, "`continue` cannot leave a loop unrolled while parsing"),
    (bad_print, DSLSyntaxError, "print() does not exist in a kernel; use printf"),
    (bad_static_assert, DSLValueError, "static assertion failed: size must be even"),
    (bad_callee_arguments, DSLTypeError, "callee() is missing argument(s): y"),
    (bad_callee_tensor, DSLTypeError, "parameter 'x' expects a tensor of shape f32[8]"),
    (bad_pointer_dtype, DSLTypeError, "a pointer to f32"),
]


def marked_line(factory: Callable[[], None]) -> tuple[int, int, str]:
    """The absolute line number, the column (1-based, of the statement's first non-blank character) and the
    text of the line marked `# ERROR` in `factory`."""
    lines, first = inspect.getsourcelines(factory)
    for offset, text in enumerate(lines):
        if "# ERROR" in text:
            return first + offset, len(text) - len(text.lstrip()) + 1, text.rstrip("\n")
    raise AssertionError(f"{factory.__name__} has no line marked # ERROR")


def compiler_frames(error: BaseException) -> list[str]:
    """The traceback frames of `error` inside the compiler, other than the public entry point."""
    frames = []
    for frame in traceback.extract_tb(error.__traceback__):
        path = os.path.abspath(frame.filename)
        if path.startswith(COMPILER_DIRS) and (os.path.basename(path), frame.name) not in ENTRY_POINTS:
            frames.append(f"{frame.filename}:{frame.lineno} in {frame.name}")
    return frames


@pytest.mark.parametrize(("factory", "cls", "message"), CASES, ids=[c[0].__name__ for c in CASES])
def test_bad_program_is_reported_at_its_line(factory: Callable[[], None], cls: type[Exception], message: str) -> None:
    with pytest.raises(cls) as excinfo:
        factory()
    error = excinfo.value
    assert isinstance(error, DSLError)
    text = str(error)
    line, _, source = marked_line(factory)
    header, shown, caret = text.split("\n")[:3]
    m = re.match(r"(?P<file>.+):(?P<line>\d+):(?P<col>\d+): error: (?P<message>.*)$", header)
    assert m is not None, text
    assert os.path.samefile(m["file"], __file__)
    assert int(m["line"]) == line, f"the error names line {m['line']}, the offending line is {line}:\n{text}"
    assert message in m["message"]
    assert shown.strip() == source.strip()  # the source line, then a caret under the named column
    col = int(m["col"])
    assert caret.strip() == "^" and caret.index("^") - shown.index(source.strip()) == col - 1 - (
        len(source) - len(source.lstrip()))
    assert error.span is not None and error.span.line == line
    assert compiler_frames(error) == []
    assert error.__cause__ is None and error.__suppress_context__


def test_misspelt_attribute_lists_the_valid_names() -> None:
    with pytest.raises(DSLAttributeError) as excinfo:
        bad_attr()
    for name in ("attrs.func_kind", "attrs.func_name", "attrs.noinline", "attrs.cuda"):
        assert name in str(excinfo.value)


def test_error_line_is_right_for_a_kernel_indented_in_a_class() -> None:
    class Holder:
        @staticmethod
        def make() -> None:
            @hidet.script
            def k(a: f32[4]):
                a[0] = 1.0
                a[1] = a  # ERROR

    with pytest.raises(DSLTypeError) as excinfo:
        Holder.make()
    line, col, _ = marked_line(test_error_line_is_right_for_a_kernel_indented_in_a_class)
    assert excinfo.value.span.line == line
    assert excinfo.value.span.col + 1 == col
    assert compiler_frames(excinfo.value) == []


def test_build_errors_have_no_compiler_frames() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def internal_only(x: i32) -> i32:
            return x + 1

    with pytest.raises(ValueError, match="no function callable from Python") as excinfo:
        module.build()
    assert compiler_frames(excinfo.value) == []
