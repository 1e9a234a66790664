"""A compiled CPU graph's time, kernel by kernel (`CompiledGraph.profile`).

The graph runs `runs` times (after one untimed run that warms the caches and the thread pool), as a call runs it,
with the clock read around every kernel; each kernel's time is the median of its runs (its call from Python, the
argument checks included), its share the fraction of the median call. The time outside the kernels is the median
call less the kernels' medians: checking and binding the inputs, allocating the buffers and outputs, the Python
loop over the launches. Each kernel also gets its arithmetic (`flops`: the operations its fused operators' compute
definitions do) and the bytes it must move at least (every array it is passed, once), as rates and as fractions of
the machine's peak (`cpu_peak.Peak`). `GraphProfile` prints as a table and gives its rows as plain records.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hidet_lang.ir.types import DTYPE_BY_NAME
from stdlib_ops.graph.flops import flops_value
from stdlib_ops.graph.memory_plan import Plan, Ref
from stdlib_ops.templates.cpu_peak import Peak


@dataclass(frozen=True)
class KernelTime:
    """One launch of a profiled graph: its position in the call, its title (the operators it computes, the anchor
    marked `*` where it fuses several), its median `seconds` and `share` of the median call, the operations it does
    (`flops`; None where the graph does not know them) and the bytes of the arrays it is passed (`bytes`)."""

    position: int
    title: str
    seconds: float
    share: float
    flops: int | None
    bytes: int

    @property
    def gflops(self) -> float | None:
        """Its arithmetic rate, in 1e9 operations a second (None where its operations are not known)."""
        return None if self.flops is None or self.seconds <= 0 else self.flops / self.seconds / 1e9

    @property
    def gbs(self) -> float:
        """Its rate of compulsory memory traffic, in 1e9 bytes a second."""
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class GraphProfile:
    """The profile of one compiled graph on one set of inputs: `kernels` in launch order, the median call
    (`total_seconds`) over `runs` runs, and the machine's `peak`."""

    kernels: tuple[KernelTime, ...]
    total_seconds: float
    runs: int
    peak: Peak

    @property
    def kernel_seconds(self) -> float:
        """The kernels' medians, summed."""
        return sum(k.seconds for k in self.kernels)

    @property
    def outside_seconds(self) -> float:
        """The median call less the kernels' medians (negative only within the noise of the medians)."""
        return self.total_seconds - self.kernel_seconds

    def by_title(self) -> list[tuple[str, int, float]]:
        """The kernels grouped by title: (title, launches, seconds summed), the most time first."""
        groups: dict[str, tuple[int, float]] = {}
        for k in self.kernels:
            count, seconds = groups.get(k.title, (0, 0.0))
            groups[k.title] = (count + 1, seconds + k.seconds)
        return sorted(((t, c, s) for t, (c, s) in groups.items()), key=lambda row: -row[2])

    def records(self) -> list[dict[str, Any]]:
        """One plain record a kernel (its fields, and its rates `gflops`, `gbs` and their fractions of the peak
        `peak_flops_fraction`, `peak_bytes_fraction`), then one for the time outside the kernels (title
        '(outside kernels)', position -1)."""
        rows = []
        for k in self.kernels:
            gflops = k.gflops
            rows.append({**asdict(k), "gflops": gflops, "gbs": k.gbs,
                         "peak_flops_fraction": None if gflops is None or not self.peak.gflops
                         else gflops / self.peak.gflops,
                         "peak_bytes_fraction": k.gbs / self.peak.gbs})
        rows.append({"position": -1, "title": "(outside kernels)", "seconds": self.outside_seconds,
                     "share": self.outside_seconds / self.total_seconds if self.total_seconds > 0 else 0.0,
                     "flops": None, "bytes": 0, "gflops": None, "gbs": 0.0, "peak_flops_fraction": None,
                     "peak_bytes_fraction": 0.0})
        return rows

    def __str__(self) -> str:
        lines = [f"{'#':>3} {'kernel':50} {'ms':>8} {'share':>6} {'GFLOP/s':>8} {'%peak':>6} {'GB/s':>7} "
                 f"{'%peak':>6}"]
        for row in self.records():
            position = "" if row["position"] < 0 else str(row["position"])
            gflops = "" if row["gflops"] is None else f"{row['gflops']:.1f}"
            flops_peak = "" if row["peak_flops_fraction"] is None else f"{100 * row['peak_flops_fraction']:.0f}"
            gbs = f"{row['gbs']:.1f}" if row["bytes"] else ""
            bytes_peak = f"{100 * row['peak_bytes_fraction']:.0f}" if row["bytes"] else ""
            lines.append(f"{position:>3} {_clip(row['title'], 50):50} {row['seconds'] * 1e3:8.3f} "
                         f"{100 * row['share']:5.1f}% {gflops:>8} {flops_peak:>6} {gbs:>7} {bytes_peak:>6}")
        lines.append(f"{'':>3} {'total (median call)':50} {self.total_seconds * 1e3:8.3f} {100.0:5.1f}%")
        lines.append(f"{self.runs} runs, medians; {self.peak}")
        return "\n".join(lines)


def make_profile(plan: Plan, titles: Sequence[str], constant_bytes: Sequence[int], sizes: Mapping[str, int],
                 calls: Sequence[float], launches: Sequence[Sequence[float]], peak: Peak) -> GraphProfile:
    """The profile of `plan`'s launches (kernel k titled `titles[k]`) from the timed runs: `calls[r]` the seconds
    of run r, `launches[r][j]` those of its launch j; symbolic sizes bound to `sizes`; `constant_bytes[k]` the
    size of constant k."""
    total = statistics.median(calls)
    kernels = []
    for j, launch in enumerate(plan.launches):
        seconds = statistics.median(run[j] for run in launches)
        flops = flops_value(launch.flops, sizes) if launch.flops is not None else None
        moved = sum(_ref_bytes(plan, constant_bytes, ref, sizes) for ref in dict.fromkeys(launch.args))
        kernels.append(KernelTime(j, titles[launch.kernel], seconds, seconds / total if total > 0 else 0.0, flops,
                                  moved))
    return GraphProfile(tuple(kernels), total, len(calls), peak)


def _ref_bytes(plan: Plan, constant_bytes: Sequence[int], ref: Ref, sizes: Mapping[str, int]) -> int:
    """The bytes of the array `ref` names in a call with `sizes` (0 for a size argument)."""
    role, which = ref
    if role == "size":
        return 0
    if role == "const":
        return constant_bytes[which]
    if role == "input":
        spec = plan.inputs[which]
    elif role == "buffer":
        spec = plan.buffers[which][0]
    else:
        spec = next(s for r, s in plan.outputs if r == ref)
    elements = 1
    for d in spec.resolve(dict(sizes)):
        elements *= d
    return elements * DTYPE_BY_NAME[spec.dtype].nbytes


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"
