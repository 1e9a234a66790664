"""Hand-written mutants of the CUDA emulator's headers, and whether the tests kill them.

    python tests/mutation/run_emulator_mutants.py                    # every patch in emulator_mutants/
    python tests/mutation/run_emulator_mutants.py shfl_down_wraps    # the named ones

mutmut mutates Python only, and the emulator (codegen/include/hidet_lang/emulator_*.h and emulator_runtime.cpp) is
C++: each patch under `emulator_mutants/` plants one plausible bug there, and its header names the test files that
should catch it (a line `# tests: FILE ...`). For each patch the project's files (tracked and untracked, not ignored:
`git ls-files`) are copied to a temporary directory, the patch is applied there, and those test files run against
the copy (`PYTHONPATH` the copy, a compilation cache of the run's own; the cache keys hash the headers anyway).
A mutant is killed when the tests fail or run past `--timeout`. The same test files first run on an unpatched
copy, which must pass.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = Path(__file__).resolve().parent / "emulator_mutants"


def tests_of(patch: Path) -> list[str]:
    """The test files named in the header of `patch` (its `# tests:` lines)."""
    tests = [name for line in patch.read_text().splitlines() if line.startswith("# tests:")
             for name in line.removeprefix("# tests:").split()]
    if not tests:
        raise SystemExit(f"{patch.name} names no test files (a line '# tests: FILE ...')")
    return tests


def copy_project(dest: Path) -> None:
    """Copy the project's files as they are in the working tree (tracked, and untracked but not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not copied
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def run_tests(copy: Path, tests: list[str], cache: Path, timeout: float) -> tuple[str, float, str]:
    """Run `tests` in `copy`: ("passed" | "failed" | "timeout", seconds, pytest's lines naming the failure)."""
    env = {**os.environ, "PYTHONPATH": str(copy), "HIDET_LANG_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--hypothesis-seed=0", *tests]
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, ""
    lines = (done.stdout + done.stderr).strip().splitlines()
    failures = [line for line in lines if line.startswith(("FAILED", "ERROR"))] or lines[-3:]
    return ("passed" if done.returncode == 0 else "failed"), time.monotonic() - start, "\n".join(failures)


def try_mutant(patch: Path | None, tests: list[str], work: Path, timeout: float) -> tuple[str, float, str]:
    """Copy the project under `work`, apply `patch` (None: none) and run `tests` there."""
    copy = Path(tempfile.mkdtemp(prefix="project-", dir=work))
    try:
        copy_project(copy)
        if patch is not None:
            subprocess.run(["git", "apply", str(patch)], cwd=copy, check=True)
        return run_tests(copy, tests, work / "kernel-cache", timeout)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Try each named patch (default: all); print killed/survived per mutant; exit status 1 if any survived."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="patch names (file names without .patch; default: all)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a mutant's tests may run")
    args = parser.parse_args(argv)
    patches = [MUTANTS / f"{n}.patch" for n in args.names] if args.names else sorted(MUTANTS.glob("*.patch"))
    plan = {patch: tests_of(patch) for patch in patches}
    with tempfile.TemporaryDirectory(prefix="emulator-mutants-") as tmp:
        work = Path(tmp)
        every_test = list(dict.fromkeys(t for tests in plan.values() for t in tests))
        outcome, seconds, tail = try_mutant(None, every_test, work, args.timeout)
        print(f"unpatched: {outcome} in {seconds:.0f} s ({' '.join(every_test)})", flush=True)
        if outcome != "passed":
            print(tail)
            return 2
        survivors = 0
        for patch, tests in plan.items():
            outcome, seconds, tail = try_mutant(patch, tests, work, args.timeout)
            verdict = "survived" if outcome == "passed" else f"killed ({outcome})"
            survivors += outcome == "passed"
            print(f"{patch.stem}: {verdict} in {seconds:.0f} s", flush=True)
            if outcome == "failed":
                print("    " + "\n    ".join(tail.splitlines()), flush=True)
    print(f"{len(plan) - survivors} of {len(plan)} mutants killed")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
