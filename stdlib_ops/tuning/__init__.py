"""Hardware-centric tuning of templates: `tune` times every point of a template's tuning space for each task,
through any `concurrent.futures.Executor`, and records the winners per machine and shape class, which later builds
use (`graph.build(target, tune=True)` tunes first)."""

from __future__ import annotations

from stdlib_ops.tuning.tune import TuningResult, tune

__all__ = ["TuningResult", "tune"]
