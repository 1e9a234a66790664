"""Every ```python block of README.md runs as it stands, alone: each is written to a script in an empty directory
and run by a fresh interpreter, with the CUDA emulator forced (a CUDA block runs the same on every machine) and a
compilation cache of this module's own (so that what a block records there stays out of the user's). A block that
is not a whole program carries another fence label (```text, or none)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```(?P<label>\S*)\s*$")
HEADING = re.compile(r"^#+\s+(?P<title>.+)$")
LABELS = {"python", "bash", "text", ""}
"""The fence labels README.md uses: python blocks are whole programs, the others shell commands or printed text."""
OPTIONAL_PACKAGES = {"torch": ("torch",), "onnx": ("onnx", "onnxscript")}
"""Packages of the `frontends` extra a block needs when it names the word: torch.onnx.export needs onnxscript."""


@dataclass(frozen=True)
class Block:
    """A fenced code block of README.md: its `label`, the line of its opening fence, the heading it is under and
    its `code`."""

    label: str
    line: int
    heading: str
    code: str

    def __str__(self) -> str:
        return f"line {self.line}, {self.heading}"


def code_blocks(text: str) -> list[Block]:
    """The fenced code blocks of markdown `text`, in order; a fence left open is an error."""
    blocks: list[Block] = []
    heading = "(before any heading)"
    opened: tuple[str, int] | None = None
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        fence = FENCE.match(line)
        if opened is not None:
            if line.startswith("```"):
                blocks.append(Block(opened[0], opened[1], heading, "\n".join(body) + "\n"))
                opened = None
            else:
                body.append(line)
        elif fence:
            opened, body = (fence["label"], number), []
        elif title := HEADING.match(line):
            heading = title["title"]
    if opened is not None:
        raise ValueError(f"README.md:{opened[1]}: a code fence is never closed")
    return blocks


def missing_packages(code: str) -> list[str]:
    """The optional packages `code` needs (`OPTIONAL_PACKAGES`) that are not installed."""
    needed = [package for word, packages in OPTIONAL_PACKAGES.items() if re.search(rf"\b{word}\b", code)
              for package in packages]
    return [package for package in needed if importlib.util.find_spec(package) is None]


BLOCKS = code_blocks(README.read_text())
PYTHON_BLOCKS = [block for block in BLOCKS if block.label == "python"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compilation cache shared by the blocks (a later block reuses what an earlier one compiled)."""
    return tmp_path_factory.mktemp("readme_cache")


def test_every_block_is_labelled() -> None:
    labels = {str(block): block.label for block in BLOCKS}
    assert set(labels.values()) <= LABELS, f"blocks with a label this test does not know: {labels}"
    python_fences = [line for line in README.read_text().splitlines() if line.rstrip() == "```python"]
    assert len(PYTHON_BLOCKS) == len(python_fences) > 0, [str(block) for block in PYTHON_BLOCKS]


def test_an_unclosed_fence_is_refused() -> None:
    with pytest.raises(ValueError, match=r"README.md:3: a code fence is never closed"):
        code_blocks("# title\n\n```python\nprint(1)\n")


def test_blocks_are_found_under_their_headings() -> None:
    text = "# A\n```python\n# not a heading\nx = 1\n```\n## B\n\n```\nshown\n```\n```bash\nls\n```\n"
    assert code_blocks(text) == [Block("python", 2, "A", "# not a heading\nx = 1\n"), Block("", 8, "B", "shown\n"),
                                 Block("bash", 11, "B", "ls\n")]


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=str)
def test_python_block_runs_alone(block: Block, cache_dir: Path, tmp_path: Path) -> None:
    missing = missing_packages(block.code)
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (the `frontends` extra), not installed")
    script = tmp_path / "readme_block.py"
    script.write_text(block.code)
    env = {**os.environ, "HIDET_LANG_CUDA": "emulator", "HIDET_LANG_CACHE_DIR": str(cache_dir)}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, (f"the block at README.md line {block.line} ({block.heading}) failed; its line k "
                                  f"is README.md line {block.line} + k:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
