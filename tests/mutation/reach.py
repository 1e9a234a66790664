"""A pytest plugin of mutation runs (`run_mutmut.py` loads it), so that mutmut sees every test that reaches a function.

mutmut runs the selected tests once, records which functions each test calls, and later runs only those tests
against a function's mutants. Two things would hide tests from that record:

- `ScriptModule.build` memoizes its result, so in one process only the first test to build a module runs the
  passes, the code generation and the argument checks' construction for it; a later test that builds the same
  module (to check a bad argument, say) would not be listed, and a mutant only it catches would survive. Here the
  memo lasts one test: within a test, repeated builds still return the same compiled module, as users see them.
- Functions called while the test modules are imported (the simplifier's rule table is built by its pattern
  functions at import) would be credited to the first test alone. Here they are credited to every test.
"""

from __future__ import annotations

from typing import Any

import pytest
from mutmut.state import state

from hidet_lang.frontend.script import ScriptModule

_memoized_build = ScriptModule.build
_test_number = 0
_called_at_import: set[str] = set()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Take the functions called while the tests were collected (imported) out of the first test's record."""
    _called_at_import.update(state()._stats)
    state()._stats.clear()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Count the tests (a module's builds from an earlier test are forgotten); credit this test with the functions
    called at import."""
    global _test_number
    _test_number += 1
    state()._stats.update(_called_at_import)


def _build_once_per_test(self: ScriptModule, target: str | None = None, **options: Any) -> Any:
    if getattr(self, "_memo_test_number", None) != _test_number:
        self._built.clear()
        self._memo_test_number = _test_number
    return _memoized_build(self, target, **options)


ScriptModule.build = _build_once_per_test
