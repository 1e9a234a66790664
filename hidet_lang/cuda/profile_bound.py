"""A lower bound on a CUDA kernel's time from its profile counts (`profile_report.KernelRecord`) and the peak rates
of its architecture: the time each resource alone would need for the work counted, and which one binds.

It is a bound, never a prediction: a kernel takes at least the largest of these times on the reference part of its
architecture (`PEAKS`), and usually longer (latency, occupancy, the instructions the profile does not count).
Per-SM resources are shared by the SMs a launch can use: at most one a block (`min(sms, blocks per launch)`).
The DRAM time counts each distinct global sector once (data already in L2 from an earlier kernel could come
faster; nothing else can).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hidet_lang.cuda_limits import arch_number, normalize_arch

if TYPE_CHECKING:
    from hidet_lang.cuda.profile_report import KernelRecord

__all__ = ["PEAKS", "Peaks", "TimeBound", "microseconds", "peaks", "time_bound"]


@dataclass(frozen=True)
class Peaks:
    """The peak rates of one part: `sms` SMs at `clock_hz`; per SM and clock: `fp32_lanes` f32 FMA lanes,
    `sfu_lanes` special-function lanes, `tensor_flops` dense f16 tensor-core operations (an FMA counts 2),
    `shared_wavefronts` shared-memory wavefronts (32 banks of 4 bytes), `l1_sectors` global sectors through L1,
    `issue` warp instructions (one a scheduler); `dram_bytes_per_s` the DRAM bandwidth."""

    part: str
    sms: int
    clock_hz: float
    fp32_lanes: int
    sfu_lanes: int
    tensor_flops: int
    dram_bytes_per_s: float
    shared_wavefronts: int = 1
    l1_sectors: int = 4
    issue: int = 4


PEAKS = {
    80: Peaks("A100 SXM4 80GB", sms=108, clock_hz=1.41e9, fp32_lanes=64, sfu_lanes=16, tensor_flops=2048,
              dram_bytes_per_s=2.039e12),
    86: Peaks("RTX 3090", sms=82, clock_hz=1.695e9, fp32_lanes=128, sfu_lanes=16, tensor_flops=512,
              dram_bytes_per_s=936e9),
    89: Peaks("RTX 4090", sms=128, clock_hz=2.52e9, fp32_lanes=128, sfu_lanes=16, tensor_flops=512,
              dram_bytes_per_s=1008e9),
    90: Peaks("H100 SXM5", sms=132, clock_hz=1.83e9, fp32_lanes=128, sfu_lanes=16, tensor_flops=4096,
              dram_bytes_per_s=3.35e12),
}
"""The reference part of each compute capability (its datasheet's boost clock and dense rates)."""


def peaks(arch: str) -> Peaks:
    """The peaks of architecture `arch` ('sm_80', 'sm_90a', '90'): those of the closest older one in `PEAKS`;
    ValueError for one older than all of them."""
    capability = arch_number(normalize_arch(arch))
    known = [c for c in PEAKS if c <= capability]
    if not known:
        raise ValueError(f"no peak rates known for {arch!r}; the oldest architecture known is sm_{min(PEAKS)}")
    return PEAKS[max(known)]


@dataclass(frozen=True)
class TimeBound:
    """The seconds each resource alone needs (`resources`, by name) on `part`; `binding` names the largest,
    `seconds` its time: the kernel's time is at least that."""

    part: str
    resources: dict[str, float]

    @property
    def binding(self) -> str:
        """The resource whose time is the largest."""
        return max(self.resources, key=lambda name: self.resources[name])

    @property
    def seconds(self) -> float:
        """The lower bound: the largest resource time."""
        return self.resources[self.binding]

    def __str__(self) -> str:
        parts = ", ".join(f"{name} {microseconds(t)}"
                          for name, t in sorted(self.resources.items(), key=lambda kv: -kv[1]))
        return f">= {microseconds(self.seconds)} ({self.binding} bound on {self.part}; {parts})"


def microseconds(seconds: float) -> str:
    """`seconds` as the profile prints a time: microseconds, 3 significant digits ('0.847 us')."""
    return f"{seconds * 1e6:.3g} us"


def time_bound(kernel: KernelRecord, arch: str) -> TimeBound:
    """The lower bound on the time of `kernel`'s launches (all of them together) on architecture `arch`."""
    p = peaks(arch)
    per_launch = math.ceil(kernel.blocks / max(kernel.launches, 1))
    sms = max(1, min(p.sms, per_launch))
    cycles = sms * p.clock_hz  # SM-clocks a second over the SMs a launch uses
    counted = sum(kernel.instructions.values())
    resources = {
        "tensor": kernel.tensor_flops / (p.tensor_flops * cycles),
        "fma": kernel.fp32_warp_instructions * 32 / (p.fp32_lanes * cycles),
        "sfu": kernel.instructions.get("sfu", 0) * 32 / (p.sfu_lanes * cycles),
        "issue": counted / (p.issue * cycles),
        "l1": kernel.global_sectors / (p.l1_sectors * cycles),
        "shared": kernel.shared_wavefronts / (p.shared_wavefronts * cycles),
        "dram": kernel.distinct_sectors * 32 / p.dram_bytes_per_s,
    }
    return TimeBound(p.part, resources)
