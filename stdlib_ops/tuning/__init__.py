"""Hardware-centric tuning of templates: `tune` times every point of a template's tuning space for each task,
through any `concurrent.futures.Executor`, and records the winners per machine and shape class, which later builds
use (`graph.build(target, tune=True)` tunes first). For a GPU, the two halves can run apart: `tune(..., bundle=DIR)`
builds the candidates on any machine, `time_bundle(DIR)` (`python -m stdlib_ops.tuning time DIR`) times them on the
GPU; records measured by the project ship in the package per GPU model (`records.SHIPPED_DIR`)."""

from __future__ import annotations

from stdlib_ops.tuning.bundle import time_bundle
from stdlib_ops.tuning.tune import TuningResult, tune

__all__ = ["TuningResult", "time_bundle", "tune"]
