"""Frontend fuzzing: mutants of valid kernels must build or fail with a DSL error at a source location.

    python examples/fuzz_frontend.py [-n 5000] [--per-batch 100] [--seed 0] [--mutations 1] [--out fuzz_frontend]

Mutates generated programs (``hidet_lang.testing.mutate``; a CPU or a CUDA kernel each), judges every mutant
(``hidet_lang.testing.frontend_fuzz``: parse, lower, build) and prints the counts of each verdict. Internal errors
and hangs are saved to ``--out/<n>.py`` with the error at the top, as a comment.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from pathlib import Path

from hidet_lang.testing.differential import draw_examples
from hidet_lang.testing.frontend_fuzz import check_mutants
from hidet_lang.testing.programs import module_source, programs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5000, help="mutants to judge")
    parser.add_argument("--per-batch", type=int, default=100, help="mutants built together")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mutations", type=int, default=1, help="mutations applied to each program")
    parser.add_argument("--out", default="fuzz_frontend", help="where internal errors and hangs are saved")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    counts: Counter[str] = Counter()
    judged, saved, start = 0, 0, time.time()
    batch_number = 0
    while judged < args.n:
        count = min(args.per_batch, args.n - judged)
        drawn = draw_examples(programs(max_stmts=4), count, args.seed * 1_000_003 + batch_number)
        sources = [module_source([p], rng.choice(["cpu", "cpu", "cuda"]), prefix=f"b{batch_number}_{i}_")
                   for i, p in enumerate(drawn)]
        for verdict in check_mutants(sources, rng, mutations=args.mutations, directory=str(out / "modules")):
            judged += 1
            counts[f"{verdict.kind}" + (f" ({verdict.stage})" if verdict.stage else "")] += 1
            if verdict.is_finding:
                comment = "\n".join("# " + line for line in f"{verdict.kind} at {verdict.stage} after "
                                    f"{verdict.mutations}: {verdict.detail}".splitlines())
                (out / f"{saved}.py").write_text(comment + "\n" + verdict.source)
                saved += 1
        batch_number += 1
        print(f"{judged} mutants, {time.time() - start:.0f} s: " + ", ".join(f"{k}={v}" for k, v in
                                                                           sorted(counts.items())), flush=True)
    print(f"\nmutants judged: {judged}; internal errors and hangs saved: {saved} (in {out})")


if __name__ == "__main__":
    main()
