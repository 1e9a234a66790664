"""The fingerprint of the project's code in module records' keys (`codegen.toolchain.code_identity`): it names the
code, not where it lies or when it was written, and a process reads the files' contents only when their sizes or
modification times changed since the cache last saw them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from codegen.toolchain import code_identity
from codegen.toolchain.code_identity import code_files, code_identity_of, project_root


def _tree(root: Path) -> Path:
    """A small copy of the packages' layout below `root`: a pass, a header, and files the fingerprint skips."""
    for relative, text in {"hidet_lang/passes/lower.py": "LEVEL = 1\n",
                           "hidet_lang/frontend/parser.py": "PARSER = 1\n",
                           "hidet_lang/explorer/page.py": "PAGE = 1\n",
                           "codegen/include/hidet_lang/runtime.h": "#define HL 1\n",
                           "codegen/emit/notes.txt": "not code\n"}.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_fingerprint_reads_the_code_that_builds(tmp_path: Path) -> None:
    files = [relative for relative, _, _ in code_files(str(_tree(tmp_path / "a")))]
    assert files == [os.path.join("codegen", "include", "hidet_lang", "runtime.h"),
                     os.path.join("hidet_lang", "passes", "lower.py")]
    # the real tree: every module of the code generator, none of the applications'
    real = [relative for relative, _, _ in code_files(project_root())]
    assert os.path.join("codegen", "build.py") in real
    assert os.path.join("hidet_lang", "passes", "pipeline.py") in real
    assert os.path.join("codegen", "include", "hidet_lang", "emulator_runtime.cpp") in real  # linked by every module
    assert not any(relative.startswith(tuple(code_identity.NOT_BUILDING)) for relative in real)


def test_two_clones_of_the_same_code_share_a_fingerprint(tmp_path: Path, cache_root: Path) -> None:
    first = _tree(tmp_path / "first")
    second = tmp_path / "elsewhere" / "second"
    shutil.copytree(first, second)
    os.utime(second / "hidet_lang" / "passes" / "lower.py", ns=(1, 1))
    assert code_identity_of(str(first)) == code_identity_of(str(second))


@pytest.mark.parametrize("edit", ["contents", "new file", "removed file", "renamed file"])
def test_an_edit_changes_the_fingerprint(edit: str, tmp_path: Path, cache_root: Path) -> None:
    root = _tree(tmp_path / "tree")
    before = code_identity_of(str(root))
    lower = root / "hidet_lang" / "passes" / "lower.py"
    if edit == "contents":
        lower.write_text("LEVEL = 2\n")  # the same size: the time tells
    elif edit == "new file":
        (root / "codegen" / "emit" / "more.py").write_text("")
    elif edit == "removed file":
        lower.unlink()
    else:
        lower.rename(lower.with_name("lowering.py"))
    assert code_identity_of(str(root)) != before


def test_unchanged_files_are_not_read_again(tmp_path: Path, cache_root: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(_tree(tmp_path / "tree"))
    first = code_identity_of(root)

    def read(*args: object) -> str:
        raise AssertionError("the files were read again")

    monkeypatch.setattr(code_identity, "content_identity", read)
    assert code_identity_of(root) == first  # remembered by the cache for these sizes and times
    os.utime(os.path.join(root, "hidet_lang", "passes", "lower.py"), ns=(5, 5))
    with pytest.raises(AssertionError, match="read again"):
        code_identity_of(root)


def test_a_damaged_memory_is_read_past(tmp_path: Path, cache_root: Path) -> None:
    root = str(_tree(tmp_path / "tree"))
    first = code_identity_of(root)
    for remembered in cache_root.rglob(code_identity.CODE_IDENTITY.file):
        os.chmod(remembered, 0o600)
        remembered.write_text("planted")
    assert code_identity_of(root) == first  # the entry's checksum no longer matches: the contents are read
