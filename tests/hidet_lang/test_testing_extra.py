"""`import hidet_lang.testing` without hypothesis (a plain install, without the `test` extra) names the extra."""

from __future__ import annotations

import subprocess
import sys


def test_missing_hypothesis_names_the_test_extra() -> None:
    blocked = "import sys; sys.modules['hypothesis'] = None; import hidet_lang.testing"
    result = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: hidet_lang.testing needs hypothesis")
    assert "pip install '.[test]'" in last
