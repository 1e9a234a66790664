"""Run Hidet's own Hidet Script programs with hidet_lang: the tutorials of `gallery/hidet-script/` and the test files
`tests/script/test_*.py` of a checkout of hidet-org/hidet, with only their imports rewritten as the README's
"Coming from Hidet" says (`import hidet` -> `import hidet_lang as hidet`, `hidet.lang[.X]` -> `hidet_lang[.X]`,
`from hidet[.X] import` -> `from hidet_lang[.X] import`, inside functions too). CUDA programs run on a GPU when
there is one, else on the CUDA emulator.

Prints one line per tutorial and per test function (passed; failed, with the first line of the error; or one of the
explained outcomes of `EXPLAINED_FAILURES`, with its reason) and the counts. Nothing of Hidet's is copied into this
repository: the rewritten files live in a temporary directory.

    python examples/hidet_parity.py /path/to/hidet          # a checkout (work tree) of hidet-org/hidet
    python examples/hidet_parity.py --git /path/to/hidet.git  # or a (bare) git repository, read at HEAD
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

SOURCES = ("gallery/hidet-script", "tests/script")
TIMEOUT_S = 600

EXPLAINED_FAILURES: tuple[tuple[str, str, str, str], ...] = (
    # (the test, or "" for any; what its error says; the status it gets instead of 'failed'; why)
    ("", "Torch not compiled with CUDA enabled", "skipped", "makes torch tensors on a GPU, and there is none"),
    ("", "inline PTX (asm) is not supported on this target", "skipped",
     "runs inline PTX, which needs a GPU, and there is none"),
    ("", "cannot import name 'Task' from 'hidet_lang.ir'", "not offered",
     "implements a hidet.ir.Task by hand and runs a pass of Hidet's compiler on it (compiler internals)"),
)
"""Failures that are not a fault of hidet_lang, each with the status it is counted under and why: programs that
need a real GPU without one, and programs that use Hidet's compiler internals (each difference is explained in the
README's "Coming from Hidet")."""
STATUSES = ("passed", "failed", "skipped", "not offered", "differs")

CONFTEST = '''import pytest


def pytest_configure(config):
    for name in ("slow", "release", "requires_cuda", "requires_cuda_hopper", "requires_cuda_blackwell",
                 "requires_hip"):
        config.addinivalue_line("markers", f"{name}: a marker of Hidet's test suite")
'''
"""Registers the markers Hidet's tests use (its own conftest is not run: it reaches into Hidet's internals)."""


@dataclass
class Outcome:
    """One program's or test function's result (one of `STATUSES`) and a line saying why."""

    name: str
    status: str
    detail: str = ""

    def __post_init__(self) -> None:
        if self.status != "failed":
            return
        for test, error, status, why in EXPLAINED_FAILURES:
            if test in ("", self.name) and error in self.detail:
                self.status, self.detail = status, why
                return


def rewrite_imports(source: str) -> str:
    """`source` with Hidet's imports replaced by hidet_lang's: `import hidet` becomes `import hidet_lang as hidet`
    (and `import hidet_lang`, for code that names `hidet.lang` explicitly), `hidet.lang` becomes `hidet_lang`, and
    the other `from hidet... import` lines import from `hidet_lang...`."""
    source = re.sub(r"^(\s*)import hidet\s*$", r"\1import hidet_lang as hidet\n\1import hidet_lang", source,
                    flags=re.MULTILINE)
    source = re.sub(r"\bhidet\.lang\b", "hidet_lang", source)
    return re.sub(r"^(\s*)from hidet\b(?!_)", r"\1from hidet_lang", source, flags=re.MULTILINE)


def checkout_files(root: Path | None, git_dir: Path | None, into: Path) -> list[Path]:
    """The tutorials and script tests of the checkout `root` (or of the repository `git_dir` at HEAD), rewritten
    into `into`; returns their paths there."""
    if git_dir is not None:
        archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", "HEAD", *SOURCES], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
        root = into
    assert root is not None
    found = []
    for folder in SOURCES:
        for path in sorted((root / folder).glob("*.py")):
            if folder == "tests/script" and not path.name.startswith("test_"):
                continue
            target = into / "rewritten" / folder / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(rewrite_imports(path.read_text()))
            found.append(target)
    (into / "rewritten" / "tests" / "script" / "conftest.py").write_text(CONFTEST)
    return found


def first_line(text: str) -> str:
    """The last line of an error report that says what went wrong (an exception's line)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^(E\s+)?[\w.]*(Error|Exception|Exit)\b", line)]
    return errors[-1] if errors else lines[-1] if lines else ""


def run_tutorial(path: Path) -> list[Outcome]:
    """Run a tutorial as a script in its own directory."""
    try:
        done = subprocess.run([sys.executable, path.name], cwd=path.parent, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return [Outcome(path.name, "failed", f"timed out after {TIMEOUT_S} s")]
    if done.returncode == 0:
        return [Outcome(path.name, "passed")]
    return [Outcome(path.name, "failed", first_line(done.stderr or done.stdout))]


def run_tests(path: Path) -> list[Outcome]:
    """Run a test file with pytest; one outcome per test (per parametrization)."""
    report = path.with_suffix(".xml")
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                               f"--junitxml={report}", path.name], cwd=path.parent, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return [Outcome(path.name, "failed", f"timed out after {TIMEOUT_S} s")]
    if not report.exists():
        return [Outcome(path.name, "failed", first_line(done.stdout + done.stderr))]
    outcomes = []
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{path.name}::{case.get('name')}"
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if problem is not None:
            outcomes.append(Outcome(name, "failed", first_line(problem.text or problem.get("message", ""))))
        elif skipped is not None:
            outcomes.append(Outcome(name, "skipped", skipped.get("message") or ""))
        else:
            outcomes.append(Outcome(name, "passed"))
    return outcomes or [Outcome(path.name, "failed", first_line(done.stdout + done.stderr))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", nargs="?", type=Path, help="a work tree of hidet-org/hidet")
    parser.add_argument("--git", type=Path, help="a git repository of hidet-org/hidet instead (read at HEAD)")
    args = parser.parse_args()
    if (args.checkout is None) == (args.git is None):
        parser.error("give a checkout, or --git with a repository")
    with tempfile.TemporaryDirectory(prefix="hidet_parity_") as temp:
        outcomes: list[Outcome] = []
        for path in checkout_files(args.checkout, args.git, Path(temp)):
            results = run_tests(path) if path.name.startswith("test_") else run_tutorial(path)
            for outcome in results:
                detail = f"  ({outcome.detail[:160]})" if outcome.detail else ""
                print(f"{outcome.status:11} {outcome.name}{detail}", flush=True)
            outcomes += results
    counts = ", ".join(f"{sum(o.status == status for o in outcomes)} {status}" for status in STATUSES)
    print(f"\n{counts} of {len(outcomes)} (tutorials and test functions)")


if __name__ == "__main__":
    main()
