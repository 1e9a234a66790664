"""Frontend fuzzing: mutants of valid kernels build, or fail with a DSL error at a source location.

Mutants (``hidet_lang.testing.mutate``) of generated programs delete, duplicate and swap statements and
subexpressions and change constants, names, operators and call arguments; ``hidet_lang.testing.frontend_fuzz``
judges each one (parse, lower, then one build for all the mutants that lowered). An internal error (an exception
that is not a located DSL error) or a hang fails the test with the mutant's source. ``examples/fuzz_frontend.py``
runs many more.
"""

from __future__ import annotations

import random

import pytest

from hidet_lang.testing.differential import draw_examples
from hidet_lang.testing.frontend_fuzz import check_mutants
from hidet_lang.testing.programs import module_source, programs


# (seed, target, programs, mutants of each): CUDA builds cost more (the emulator's C++ and NVRTC), so fewer
@pytest.mark.parametrize(("seed", "target", "count", "rounds"), [(21, "cpu", 25, 4), (22, "cpu", 25, 4),
                                                                  (23, "cuda", 15, 2)])
def test_mutants_build_or_fail_with_a_located_dsl_error(seed: int, target: str, count: int, rounds: int,
                                                        tmp_path) -> None:  # noqa: ANN001
    drawn = draw_examples(programs(max_stmts=4), count, seed)
    sources = [module_source([p], target, prefix=f"k{i}_{r}_") for r in range(rounds) for i, p in enumerate(drawn)]
    verdicts = check_mutants(sources, random.Random(seed), directory=str(tmp_path))
    findings = [v for v in verdicts if v.is_finding]
    assert not findings, "\n\n".join(f"{v.kind} at {v.stage} after {v.mutations}:\n{v.detail}\n{v.source}"
                                     for v in findings[:3])
    assert sum(v.kind == "ok" for v in verdicts) > len(verdicts) // 5  # the mutants are not all rejected
