"""Differential fuzzing: generated kernels on the CPU, the CUDA emulator and the IR interpreter must agree.

    python examples/fuzz_programs.py [-n 10000] [--batch 40] [--seed 0] [--out fuzz_reports]

Draws ``-n`` programs (``hidet_lang.testing.programs``) with inputs, builds them ``--batch`` at a time into one CPU
and one CUDA module, runs every program on the three targets and prints how many ran and how many disagreed per
target. Each disagreement is saved to ``--out/<n>/`` as ``cpu.py`` and ``cuda.py`` (a one-program script module),
``inputs.npz`` and ``results.txt``.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from hidet_lang.testing.differential import TARGETS, Outcome, draw_examples, program_inputs, run_batch
from hidet_lang.testing.programs import module_source, programs


def save(outcome: Outcome, folder: Path) -> None:
    """Write a disagreeing program, its inputs and every target's results into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for target in ("cpu", "cuda"):
        (folder / f"{target}.py").write_text(module_source([outcome.program], target))
    np.savez(folder / "inputs.npz", xi=outcome.inputs[0], xf=outcome.inputs[1])
    lines = []
    for target, result in outcome.results.items():
        text = result if isinstance(result, str) else f"oi={result[0].tolist()}\nof={result[1].tolist()}"
        lines.append(f"== {target}\n{text}")
    (folder / "results.txt").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000, help="programs to run")
    parser.add_argument("--batch", type=int, default=40, help="programs per compiled module")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="fuzz_reports", help="where disagreements are saved")
    args = parser.parse_args()
    out = Path(args.out)
    ran, disagreements, saved = 0, Counter[str](), 0
    start = time.time()
    for batch_number in range((args.n + args.batch - 1) // args.batch):
        count = min(args.batch, args.n - ran)
        drawn = draw_examples(st.tuples(programs(), program_inputs()), count, args.seed * 1_000_003 + batch_number)
        outcomes = run_batch([p for p, _ in drawn], [x for _, x in drawn], str(out / "modules"))
        for outcome in outcomes:
            ran += 1
            bad = outcome.disagreeing()
            for target in bad:
                disagreements[target] += 1
            if bad:
                save(outcome, out / str(saved))
                saved += 1
        print(f"{ran} programs, {time.time() - start:.0f} s, disagreements: "
              + ", ".join(f"{t}={disagreements[t]}" for t in TARGETS[:2]), flush=True)
    print(f"\nprograms run: {ran}")
    for target in TARGETS[:2]:
        print(f"{target} disagrees with the interpreter: {disagreements[target]}")
    print(f"reproducers saved: {saved} (in {out})")


if __name__ == "__main__":
    main()
