"""The profile of a run on the CUDA emulator as the page receives it (`profile_view`): the program's lines with their
counters in words, other files' lines apart, the kernels with their time bounds; and a run of the shared-memory
example through the server, whose padded tile's store conflicts 2-way."""

from __future__ import annotations

from pathlib import Path

import pytest

from codegen.runtime.cuda_backend import backend
from hidet_lang.cuda.profile_report import Profile
from hidet_lang.explorer.examples import example
from hidet_lang.explorer.profile_view import counters_text, profile_view
from hidet_lang.explorer.program import Workspace


def _site(file: str | None, line: int | None, kind: str = "load", function: str | None = None,
          statement: str | None = None) -> tuple:
    return (file, line, kind, "element", (), function, statement)


def test_the_programs_lines_and_the_others(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    p = Profile()
    # counts: requests, lanes, units, ideal, bytes, moved (emulator_profile.h)
    p.record("k", _site(str(workspace.program), 7, "store"), 2, [4, 128, 8, 4, 512, 1024])
    p.record("k", _site(str(workspace.program), 7), 1, [4, 128, 16, 16, 512, 512])
    p.record("k", _site(None, None, function="k", statement="out[i] = x[i]"), 1, [1, 32, 32, 4, 128, 1024])
    p.record_kernel("k", "sm_80", 1, 2, 64, 20)
    view = profile_view(p, workspace)
    assert list(view["lines"]) == ["7"]
    store, load = view["lines"]["7"]  # the most wasteful first
    assert store["text"] == "shared store: 2.0 wavefronts/request (ideal 1.0): 2.0-way bank conflicts"
    assert load["text"] == "global load: 4.0 sectors/request (ideal 4.0)" and load["waste"] == 1
    (generated,) = view["elsewhere"]
    assert (generated["where"], generated["source"]) == ("k", "out[i] = x[i]")
    assert generated["text"] == "global load: 32.0 sectors/request (ideal 4.0): 8.0x the sectors needed"
    (kernel,) = view["kernels"]
    assert kernel["blocks"] == 2 and kernel["bound"].startswith(">= ") and "A100" in kernel["bound"]


def test_counters_of_a_line_in_words() -> None:
    p = Profile()
    p.record("k", _site("f.py", 3), 2, [2, 64, 64, 2, 256, 8192])
    assert counters_text(p.lines()[0]) == "shared load: 32.0 wavefronts/request (ideal 1.0): 32.0-way bank conflicts"


def test_a_run_on_the_emulator_brings_its_profile(client: object) -> None:
    if backend() != "emulator":
        pytest.skip("CUDA modules run on a GPU here, not on the emulator")
    shown = example("shared_memory").as_json()
    result = client.post("/api/run", json={k: shown[k] for k in ("program", "reference", "sizes")}).json()
    assert result["ok"] and result["emulated"], result
    lines = shown["program"].splitlines()
    line_of = {key: str(next(k for k, text in enumerate(lines, start=1) if key in text))
               for key in ("sa[i, j] = ", "acc += ")}
    padded_store = [r for r in result["profile"]["lines"][line_of["sa[i, j] = "]] if r["space"] == "shared"]
    assert [(r["kind"], r["waste"]) for r in padded_store] == [("store", 2.0)]  # 2 rows of 17 floats a warp
    assert [r["text"] for r in result["profile"]["lines"][line_of["acc += "]]] == [
        "shared load: 1.0 wavefronts/request (ideal 1.0)"]
    assert [k["name"] for k in result["profile"]["kernels"]] == ["matmul"]
