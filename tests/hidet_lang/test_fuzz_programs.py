"""Differential fuzzing: generated kernels agree bit for bit on the CPU, the CUDA emulator and the IR interpreter.

Each batch is 40 programs (``hidet_lang.testing.programs``) drawn from a fixed seed, compiled as one CPU module
and one CUDA module with the project's own flags (see ``hidet_lang.testing.differential``); ``examples/
fuzz_programs.py`` runs many more. A disagreement prints the program, its inputs and every target's outputs.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import strategies as st

from hidet_lang.testing.differential import draw_examples, program_inputs, run_batch, same_outputs
from hidet_lang.testing.programs import programs

BATCH = 40


@pytest.mark.parametrize("batch_seed", [11, 12, 13, 14, 15, 16, 17, 18])
def test_generated_programs_agree_on_every_target(batch_seed: int, tmp_path) -> None:  # noqa: ANN001
    drawn = draw_examples(st.tuples(programs(), program_inputs()), BATCH, batch_seed)
    outcomes = run_batch([p for p, _ in drawn], [x for _, x in drawn], str(tmp_path))
    for outcome in outcomes:
        bad = outcome.disagreeing()
        assert not bad, (
            f"{bad} disagree with the interpreter on\n{outcome.program.function_source('p', 'cpu')}\n"
            f"inputs: {outcome.inputs}\n" + "\n".join(f"{t}: {r}" for t, r in outcome.results.items())
        )


def test_programs_meet_signed_zeros_infinities_and_nan() -> None:
    """IEEE's corner cases are drawn often: each special value is an operand in a batch of programs, and every
    program ends with its two probes (a special value and one of its values), which reach the outputs."""
    drawn = draw_examples(programs(), BATCH, 3)
    text = "\n".join(line for p in drawn for line in p.body)
    for special in ("(0.0)", "(-0.0)", "(math.inf)", "(-math.inf)", "(math.nan)"):
        assert text.count(special) >= 3, special
    for p in drawn:
        probes = [line for line in p.body if re.match(r"v_\d+: f\d\d = \(", line)][-2:]
        assert len(probes) == 2 and all(re.search(r"f\d\d\((-?0\.0|-?math\.inf|math\.nan)\)", line) for line in probes)
        outputs = "\n".join(line for line in p.body if line.startswith("of["))
        assert all(re.search(rf"\b{line.split(':')[0]}\b", outputs) for line in probes), p.body


def test_programs_convert_floats_out_of_range_infinite_and_nan_to_integers() -> None:
    """The generator draws float -> integer conversions that are not clamped into range: of values scaled past the
    type's range (to an infinity too), of NaN, the infinities and ±3e9, alone and added to a value; every program
    ends with one (its conversion probe), which reaches an output."""
    drawn = draw_examples(programs(), BATCH, 5)
    text = "\n".join(line for p in drawn for line in p.body)
    conversion = r"\b[iu]\d+\("
    for pattern in (r"f\d\d\(math\.nan\)\)", r"f\d\d\(-?math\.inf\)\)", r"f\d\d\(-?3000000000\.0\)\)",
                    r"\(f\d\d\((math\.nan|-?math\.inf|-?0\.0|-?3000000000\.0)\) \+ ",
                    r"\(.* \* f\d\d\((1e\+20|1e\+300|-?10000000000\.0)\)\)"):
        assert re.search(conversion + pattern, text), pattern
    for p in drawn:
        probe = [line for line in p.body if re.match(r"v_\d+: [iu]\d+ = [iu]\d+\(", line)][-1]
        outputs = "\n".join(line for line in p.body if line.startswith("oi["))
        assert re.search(rf"\b{probe.split(':')[0]}\b", outputs), p.body


def test_agreement_rule_counts_ulps_within_one_sign() -> None:
    z = np.zeros(1, np.int64)

    def agree(x: float, y: float, ulps: int) -> bool:
        return same_outputs((z, np.array([x])), (z, np.array([y])), ulps)

    below = float(np.nextafter(-0.25, 0.0))
    assert agree(-0.25, below, 1) and not agree(-0.25, below, 0)
    assert not agree(-0.25, float(np.nextafter(below, 0.0)), 1)  # two ulps apart
    assert not agree(0.0, -0.0, 1) and not agree(5e-324, -5e-324, 1)  # a sign is never an ulp
    assert agree(float("nan"), -float("nan"), 0) and agree(float("inf"), float("inf"), 0)
    assert not same_outputs((z + 1, np.zeros(1)), (z, np.zeros(1)), 1)  # integers exactly
