"""Mutation testing of one module (or a few) with that module's own tests, through mutmut 3 (the `dev` extra).

    python tests/mutation/run_mutmut.py hidet_lang/ir/evaluate.py
    python tests/mutation/run_mutmut.py codegen/runtime/arguments.py codegen/runtime/aliasing.py
    python tests/mutation/run_mutmut.py hidet_lang/passes/simplify.py --tests tests/hidet_lang/test_simplify.py
    python tests/mutation/run_mutmut.py hidet_lang/ir/evaluate.py --mutants 'hidet_lang.ir.evaluate.x_shift*'

mutmut copies the packages to `mutants/`, rewrites each function of the mutated modules into a trampoline that
runs the original or one of its mutants, records which tests reach each function, and runs those tests against
every mutant: a mutant is killed when one fails. The settings every run shares are `[tool.mutmut]` in
pyproject.toml; this script narrows them to the named modules (`only_mutate`) and their test files (the table
`TESTS`, or `--tests`), starts from an empty `mutants/` (mutmut's results there belong to one selection), and
prints the counts and each surviving mutant with its diff. A survivor listed in
tests/mutation/equivalent_mutants.md behaves as the original does (no test can tell them apart) and is counted
apart; the exit status is 1 while any other survives. The test processes load the plugin `reach.py`, so that
every test that reaches a function is seen to: one that builds a script module built before, one that relies on
what the module imports computed. Compiled kernels go to a cache of their own
(`$XDG_CACHE_HOME/hidet_lang_mutation`), so the mutants' builds stay out of the everyday cache; a mutant that
changes the generated source gets new keys there, and one that does not shares the original's build.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EQUIVALENT_LIST = Path(__file__).resolve().parent / "equivalent_mutants.md"

TESTS: dict[str, tuple[str, ...]] = {
    "hidet_lang/ir/evaluate.py": (
        "tests/hidet_lang/test_simplify.py", "tests/hidet_lang/test_simplify_rules.py",
        "tests/hidet_lang/test_fold_floats.py", "tests/hidet_lang/test_semantics_float_mod.py",
        "tests/hidet_lang/test_cpu_vector_errors.py",
    ),
    "hidet_lang/passes/simplify.py": (
        "tests/hidet_lang/test_simplify.py", "tests/hidet_lang/test_simplify_rules.py",
        "tests/hidet_lang/test_fold_floats.py",
    ),
    "codegen/runtime/arguments.py": (
        "tests/codegen/test_call_errors.py", "tests/codegen/test_no_alias.py", "tests/codegen/test_gpu_staging.py",
        "tests/codegen/test_read_only_arguments.py",
    ),
    "codegen/runtime/aliasing.py": ("tests/codegen/test_no_alias.py", "tests/codegen/test_read_only_arguments.py"),
    "hidet_lang/passes/flatten_tensor_access.py": (
        "tests/hidet_lang/test_layout.py", "tests/hidet_lang/test_layout_kernels.py",
        "tests/hidet_lang/test_programs_memory.py",
    ),
    "hidet_lang/passes/parallel_reductions.py": ("tests/hidet_lang/test_semantics_parallel.py",),
    "hidet_lang/passes/lower_task_mappings.py": (
        "tests/hidet_lang/test_lower_mappings.py", "tests/hidet_lang/test_lower_mappings_guards.py",
    ),
}
"""The test files that exercise each module: small enough that a run takes minutes."""

STATUSES = ("killed", "survived", "timeout", "suspicious", "skipped", "no tests", "segfault", "not checked")
"""The counts printed, in order (mutmut's names for its results)."""


def equivalent_mutants(path: Path = EQUIVALENT_LIST) -> dict[str, str]:
    """The mutants listed as equivalent, by name, with the reason given (rows "| `name` | reason |")."""
    listed: dict[str, str] = {}
    for line in path.read_text().splitlines():
        match = re.match(r"\|\s*`([^`]+)`\s*\|(.*)\|\s*$", line)
        if match:
            listed[match.group(1)] = match.group(2).strip()
    return listed


def tests_for(modules: list[str], override: list[str] | None) -> list[str]:
    """The test files for `modules`: `override` when given, else the union of their rows in `TESTS`."""
    if override:
        return override
    missing = [m for m in modules if m not in TESTS]
    if missing:
        raise SystemExit(f"no test files known for {', '.join(missing)}: name them with --tests")
    return list(dict.fromkeys(t for m in modules for t in TESTS[m]))


def kernel_cache_dir() -> Path:
    """The compilation cache of mutation runs, beside the everyday one."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base and os.path.isabs(base) else Path.home() / ".cache") / "hidet_lang_mutation"


def run_mutmut(modules: list[str], tests: list[str], max_children: int, names: list[str]) -> None:
    """Run mutmut on `modules` with `tests` from an empty `mutants/` (the current directory is the project): every
    mutant, or those `names` match (mutmut's names, `*` wildcards allowed)."""
    from mutmut.__main__ import _run
    from mutmut.configuration import config

    shutil.rmtree("mutants", ignore_errors=True)
    settings = config()
    settings.only_mutate = modules
    settings.pytest_add_cli_args_test_selection = tests
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the plugin below, for the test processes
    settings.pytest_add_cli_args = [*settings.pytest_add_cli_args, "-p", "reach"]
    try:
        _run(names, max_children)
    except SystemExit as e:  # mutmut exits when the clean tests fail or no test reaches the module
        if e.code:
            raise


def results(modules: list[str]) -> dict[str, str]:
    """Each mutant of `modules` and its status, from the run's records under `mutants/`."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.stats import status_by_exit_code

    statuses: dict[str, str] = {}
    for module in modules:
        data = SourceFileMutationData(path=Path(module))
        data.load()
        statuses.update((name, status_by_exit_code[code]) for name, code in data.exit_code_by_key.items())
    return statuses


def report(modules: list[str], tests: list[str], statuses: dict[str, str], seconds: float) -> int:
    """Print the counts, the unexplained survivors with their diffs, and stale entries of the equivalent list;
    return the number of unexplained survivors."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    equivalent = equivalent_mutants()
    counts = Counter(statuses.values())
    survivors = sorted(n for n, s in statuses.items() if s == "survived")
    unexplained = [n for n in survivors if n not in equivalent]
    prefixes = tuple(m.removesuffix(".py").replace("/", ".") + "." for m in modules)
    stale = sorted(n for n in equivalent  # of this run's modules, tested, and no longer a survivor
                   if n.startswith(prefixes) and statuses.get(n) not in ("survived", "not checked"))
    print(f"\n{', '.join(modules)}: {len(statuses)} mutants in {seconds / 60:.1f} min, tests: {' '.join(tests)}")
    print("  " + ", ".join(f"{status} {counts.get(status, 0)}" for status in STATUSES)
          + f"; of the survivors {len(survivors) - len(unexplained)} listed as equivalent")
    for name in unexplained:
        print(f"\nsurvived: {name}\n{get_diff_for_mutant(name, path=module_of(name, modules))}")
    untested = sorted(n for n, s in statuses.items() if s == "no tests")
    if untested:
        functions = sorted({n.rpartition("__mutmut_")[0] for n in untested})
        print(f"\nno selected test reaches: {', '.join(functions)}")
    for name in stale:
        print(f"listed as equivalent but {statuses.get(name, 'not generated')}: {name} (update {EQUIVALENT_LIST.name})")
    return len(unexplained)


def module_of(mutant: str, modules: list[str]) -> str:
    """The file of `modules` that `mutant` (a dotted name) belongs to."""
    return next(m for m in modules if mutant.startswith(m.removesuffix(".py").replace("/", ".") + "."))


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run mutmut, report; the exit status is 1 while an unexplained mutant survives."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="+", help="files to mutate, relative to the project root")
    parser.add_argument("--tests", nargs="+", help="the test files to run (default: the table TESTS)")
    parser.add_argument("--mutants", nargs="+", default=[],
                        help="only these mutants (names or globs, e.g. the survivors of a run, after a new test)")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    profiles = ("mutation", "default", "thorough", "rerun")
    parser.add_argument("--hypothesis-profile", default="mutation", choices=profiles,
                        help="hypothesis's profile (hidet_lang/testing/profiles.py; default: the suite's example "
                             "counts, no shrinking)")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    modules = [Path(m).as_posix() for m in args.modules]
    tests = tests_for(modules, args.tests)
    os.environ["HIDET_LANG_CACHE_DIR"] = str(kernel_cache_dir())
    os.environ["HYPOTHESIS_PROFILE"] = args.hypothesis_profile
    start = time.monotonic()
    run_mutmut(modules, tests, args.max_children, args.mutants)
    seconds = time.monotonic() - start
    return 1 if report(modules, tests, results(modules), seconds) else 0


if __name__ == "__main__":
    sys.exit(main())
