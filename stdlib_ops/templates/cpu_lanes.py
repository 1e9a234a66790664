"""The vector widths the CPU templates may use on this machine: `machine_lanes`, `machine_has_lanes`, and
`template_lanes`, the width a template instantiates with; and whether it has AVX512-BF16's dot product
(`machine_has_bf16_dot`).

A template's vector type of `lanes` floats (f32x16, f32x8, f32x4) needs its instruction set and, below 16 lanes,
FMA for its fused multiply-add and exp (AVX-512F has them). The machine's C compiler is asked what `-march=native`
enables (`codegen.toolchain.cpu_features`).
"""

from __future__ import annotations

import codegen.toolchain as toolchain
from stdlib_ops.templates.params import require

VECTOR_LANES = (16, 8, 4)
"""The widths of the CPU templates' vector types, widest first."""

LANE_FEATURES = {16: {"avx512f"}, 8: {"avx", "fma"}, 4: {"sse", "fma"}}
"""The instruction sets each width needs (`codegen.toolchain.cpu_features` names)."""


def machine_has_lanes(lanes: int) -> bool:
    """Whether this machine's C compiler enables the `lanes`-wide vector type with its fused multiply-add."""
    return LANE_FEATURES[lanes] <= toolchain.machine_cpu_features()  # looked up per call: tests replace it


def machine_lanes() -> int | None:
    """The widest of `VECTOR_LANES` the machine has (`machine_has_lanes`); None when it has none (no vector FMA)."""
    return next((lanes for lanes in VECTOR_LANES if machine_has_lanes(lanes)), None)


def machine_has_bf16_dot() -> bool:
    """Whether this machine's C compiler enables AVX512-BF16's dot product of bfloat16 pairs (`f32x16_dot_bf16` as
    one instruction)."""
    return {"avx512f", "avx512bf16"} <= toolchain.machine_cpu_features()


def template_lanes(template: str, lanes: int | None) -> int:
    """The vector width `template` uses: `lanes`, or the machine's widest when None (a ScheduleError naming the
    template where the machine's C compiler enables no vector fused multiply-add)."""
    width = machine_lanes() if lanes is None else lanes
    require(width is not None, template, "the machine's C compiler enables no vector fused multiply-add")
    return width
