"""A run's verdict: every array the kernel left (or every output of a graph) against the reference's, with the
tolerance of `tolerance`; it names the worst element (the one nearest to, or furthest past, what is allowed) and
the tolerance used, whether the run matched or not."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hidet_lang.explorer.tolerance import Tolerance


@dataclass(frozen=True)
class Compared:
    """One array compared: what the page calls it, what the kernel left, what the reference left."""

    name: str
    got: np.ndarray
    want: np.ndarray


@dataclass(frozen=True)
class Verdict:
    """Whether every array matched, the sentence that says so, the worst element, the tolerance used."""

    ok: bool
    text: str
    worst: dict[str, Any] | None
    tolerance: str

    def as_json(self) -> dict[str, Any]:
        """The verdict as the run table shows it."""
        return {"ok": self.ok, "text": self.text, "worst": self.worst, "tolerance": self.tolerance}


def _excess(got: np.ndarray, want: np.ndarray, tolerance: Tolerance) -> np.ndarray:
    """For each element, its difference over the difference allowed: 0 where the two are equal (infinities of
    one sign, NaN and NaN), infinite where one is NaN or infinite and the other not; above 1, a mismatch."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.abs(g - w)
        allowed = tolerance.allowed(want)
        ratio = np.where(allowed > 0, diff / np.where(allowed > 0, allowed, 1), np.where(diff > 0, np.inf, 0.0))
    ratio = np.where(np.isnan(ratio) | np.isnan(diff) | np.isnan(allowed), np.inf, ratio)
    return np.where((g == w) | (np.isnan(g) & np.isnan(w)), 0.0, ratio)


def _worst(item: Compared, tolerance: Tolerance) -> tuple[float, dict[str, Any]]:
    ratio = _excess(item.got, item.want, tolerance)
    index = np.unravel_index(int(np.argmax(ratio)), ratio.shape) if ratio.size else ()
    got, want = item.got[index], item.want[index]
    with np.errstate(invalid="ignore", over="ignore"):
        diff = float(abs(np.float64(got) - np.float64(want)))
    worst = {"array": item.name, "index": [int(i) for i in index], "kernel": got.item(), "reference": want.item(),
             "difference": diff, "allowed": float(tolerance.allowed(np.asarray(want))),
             "mismatches": int(np.count_nonzero(ratio > 1)), "size": int(ratio.size)}
    return (float(ratio[index]) if ratio.size else 0.0), worst


def _where(worst: dict[str, Any]) -> str:
    index = ", ".join(map(str, worst["index"]))
    return (f"{worst['array']}[{index}]: kernel {worst['kernel']:.9g}, reference {worst['reference']:.9g}, "
            f"off by {worst['difference']:.3g} (allowed {worst['allowed']:.3g})")


def judge(compared: Sequence[Compared], tolerance_of: Callable[[np.dtype], Tolerance]) -> Verdict:
    """The verdict on `compared`, each array with the tolerance `tolerance_of` its dtype."""
    worst_ratio, worst, used = -1.0, None, ""
    for item in compared:
        if item.got.shape != item.want.shape or item.got.dtype != item.want.dtype:
            text = (f"{item.name}: the kernel left an array of shape {item.got.shape} and dtype {item.got.dtype}, "
                    f"the reference one of shape {item.want.shape} and dtype {item.want.dtype}")
            return Verdict(False, text, None, "")
        tolerance = tolerance_of(item.got.dtype)
        ratio, where = _worst(item, tolerance)
        if where["mismatches"]:
            text = (f"{item.name} differs from the reference: {where['mismatches']} of {where['size']} element(s) "
                    f"differ; the worst is {_where(where)}; tolerance {tolerance.how}")
            return Verdict(False, text, where, tolerance.how)
        if ratio >= worst_ratio and item.got.size:  # on a tie the later array: outputs follow inputs
            worst_ratio, worst, used = ratio, where, tolerance.how
    text = "matches the reference" + (f"; the worst element is {_where(worst)}" if worst else "")
    return Verdict(True, text, worst, used)
