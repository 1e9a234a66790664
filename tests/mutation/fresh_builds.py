"""A pytest plugin of mutation runs (`run_mutmut.py` loads it): a script module builds afresh in each test.

`ScriptModule.build` memoizes its result, so in one process only the first test to build a module runs the
passes, the code generation and the argument checks' construction for it. mutmut learns which tests reach a
function by running the suite once and watching, and runs only those against the function's mutants; with the
memo, a later test that builds the same module (to check a bad argument, say) is never listed, and a mutant that
only it would catch survives. Here the memo lasts one test: within a test, repeated builds still return the same
compiled module, as users see them.
"""

from __future__ import annotations

from typing import Any

import pytest

from hidet_lang.frontend.script import ScriptModule

_memoized_build = ScriptModule.build
_test_number = 0


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Count the tests, so that a module's builds from an earlier test are forgotten."""
    global _test_number
    _test_number += 1


def _build_once_per_test(self: ScriptModule, target: str | None = None, **options: Any) -> Any:
    if getattr(self, "_memo_test_number", None) != _test_number:
        self._built.clear()
        self._memo_test_number = _test_number
    return _memoized_build(self, target, **options)


ScriptModule.build = _build_once_per_test
