"""Hypothesis profiles for a test suite: `default` runs each test's own number of examples (sized to keep the suite
fast), `thorough` ten times as many (for a nightly run: `HYPOTHESIS_PROFILE=thorough python -m pytest`), `rerun`
a quarter of them, at least one (for a second run of tests whose data the first run covered, where the subject is
another path through the runtime: the suite on the simulated GPU), `mutation` the default counts without shrinking
(for mutation testing, tests/mutation/run_mutmut.py: a mutant is killed by any failing example, and shrinking one
would only spend the run's time).

A test states its count through `example_count`, `@settings(max_examples=example_count(20))`, which scales it by
the loaded profile (hypothesis lets an explicit `max_examples` win over any profile, so the scaling is done here).
"""

from __future__ import annotations

import os

from hypothesis import Phase, settings

THOROUGH_FACTOR = 10
"""How many times more examples the `thorough` profile runs."""

RERUN_DIVISOR = 4
"""How many times fewer examples the `rerun` profile runs."""

_BASE = 100  # the `default` profile's max_examples (hypothesis's own default): the scale of 1


def load_profile(name: str | None = None) -> str:
    """Register the profiles (`default`, `thorough`, `rerun`, `mutation`) and load `name` (default:
    `$HYPOTHESIS_PROFILE`, else `default`); returns the loaded profile's name."""
    every_phase = tuple(Phase)  # stated: a profile registered now inherits from the one loaded now
    settings.register_profile("default", max_examples=_BASE, phases=every_phase)
    settings.register_profile("thorough", max_examples=_BASE * THOROUGH_FACTOR, deadline=None, phases=every_phase)
    settings.register_profile("rerun", max_examples=_BASE // RERUN_DIVISOR, phases=every_phase)
    settings.register_profile("mutation", max_examples=_BASE, phases=[Phase.explicit, Phase.reuse, Phase.generate])
    name = name or os.environ.get("HYPOTHESIS_PROFILE", "default")
    settings.load_profile(name)
    return name


def example_count(n: int) -> int:
    """`n` examples scaled by the loaded profile (`n` under `default`, `n * THOROUGH_FACTOR` under `thorough`,
    `n / RERUN_DIVISOR` under `rerun`), at least one."""
    return max(1, n * settings.default.max_examples // _BASE)
