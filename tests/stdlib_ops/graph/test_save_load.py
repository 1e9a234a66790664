"""`compiled.save(path)` and `ops.load(path)`: a graph with a symbolic batch saved on the CPU and on CUDA runs in a
new process whose C and C++ compilers (and NVRTC) fail and whose compilation cache starts empty, at two batch
sizes, giving the original's results; corrupt, truncated and other-version files are refused with a clear error;
saved libraries that do not apply here are rebuilt from the saved IR, with a warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import stdlib_ops as ops
from stdlib_ops.graph.save import SavedGraphError

W = np.random.default_rng(0).standard_normal((33, 7)).astype(np.float32)
B = np.random.default_rng(1).standard_normal(7).astype(np.float32)

CHILD = """
import sys
import numpy as np
import codegen.toolchain.nvrtc

def no_compiler(*args, **kwargs):
    raise AssertionError("NVRTC was invoked")

codegen.toolchain.nvrtc.compile_cubin = no_compiler
import stdlib_ops as ops

graph = ops.load(sys.argv[1])
inputs = np.load(sys.argv[2])
results = {}
for name in inputs.files:
    out, hidden = graph(inputs[name])
    results[name + "_out"], results[name + "_hidden"] = out.numpy(), hidden.numpy()
np.savez(sys.argv[3], **results)
print(graph.kernels)
"""


@cache
def compiled(target: str) -> ops.CompiledGraph:
    """Prologue, matmul anchor with an epilogue, a reduction, two outputs, a constant; batch is symbolic."""
    xs = ops.symbol(["batch", 33])
    hidden = ops.relu(ops.matmul(ops.tanh(xs * 2.0), ops.asarray(W)) + ops.asarray(B))
    out = ops.softmax(hidden, axis=-1) * 3.0 + ops.max(xs, axis=1, keepdims=True)
    return ops.optimize(ops.trace_from([out, hidden], [xs])).build(target)


def failing_compiler(directory: Path) -> str:
    script = directory / "no_compiler.sh"
    script.write_text("#!/bin/sh\necho 'a compiler was invoked' >&2\nexit 1\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_a_saved_graph_runs_in_a_new_process_without_compiling(target: str, tmp_path: Path) -> None:
    graph = compiled(target)
    path = tmp_path / "graph.hlgraph"
    graph.save(str(path))
    rng = np.random.default_rng(2)
    inputs = {f"batch{b}": rng.standard_normal((b, 33)).astype(np.float32) for b in (1, 5)}
    np.savez(tmp_path / "inputs.npz", **inputs)
    env = dict(os.environ, HIDET_LANG_CACHE_DIR=str(tmp_path / "empty_cache"), CC=failing_compiler(tmp_path))
    env.pop("HIDET_LANG_VERIFY_CUBINS", None)  # the test suite's extra check compiles every CUDA module for more GPUs
    if "FAKE_CUDA_CC" not in env:  # the simulated GPU builds an emulator (C++) of each module it binds
        env["CXX"] = env["CC"]
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(tmp_path / "inputs.npz"),
                           str(tmp_path / "results.npz")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == str(graph.kernels)
    assert len(graph.kernels) == 3
    results = np.load(tmp_path / "results.npz")
    for name, x in inputs.items():
        out, hidden = graph(x)
        # the same kernels (the same machine code) on the same inputs: the same bits
        np.testing.assert_array_equal(results[name + "_out"], out.numpy())
        np.testing.assert_array_equal(results[name + "_hidden"], hidden.numpy())
        np.testing.assert_allclose(hidden.numpy(), np.maximum(np.tanh(x * 2) @ W + B, 0), rtol=1e-5, atol=1e-5)


def saved(tmp_path: Path, target: str = "cpu") -> Path:
    path = tmp_path / f"{target}.hlgraph"
    compiled(target).save(str(path))
    return path


def rewritten(path: Path, change) -> Path:
    """A copy of the saved graph at `path` whose `graph.json` went through `change`."""
    with zipfile.ZipFile(path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    header = json.loads(files["graph.json"])
    change(header)
    files["graph.json"] = json.dumps(header).encode()
    copy = path.with_name("changed_" + path.name)
    with zipfile.ZipFile(copy, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return copy


def test_truncated_corrupt_and_foreign_files_are_refused(tmp_path: Path) -> None:
    data = saved(tmp_path).read_bytes()
    truncated = tmp_path / "truncated.hlgraph"
    truncated.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(SavedGraphError, match="truncated"):
        ops.load(str(truncated))
    corrupt = tmp_path / "corrupt.hlgraph"
    middle = len(data) // 2
    corrupt.write_bytes(data[:middle] + bytes(b ^ 0xFF for b in data[middle:middle + 64]) + data[middle + 64:])
    with pytest.raises(SavedGraphError, match="corrupt"):
        ops.load(str(corrupt))
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(SavedGraphError, match="not a saved compiled graph"):
        ops.load(str(text))
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(SavedGraphError, match="damaged"):
        ops.load(str(tmp_path / "other.zip"))


def test_a_file_of_another_version_is_refused(tmp_path: Path) -> None:
    other = rewritten(saved(tmp_path), lambda header: header.update(package_version="0.0.1"))
    with pytest.raises(SavedGraphError, match=r"saved by version 0\.0\.1 .* this is version"):
        ops.load(str(other))


def test_a_damaged_plan_is_refused(tmp_path: Path) -> None:
    other = rewritten(saved(tmp_path), lambda header: header["plan"]["launches"][0][1].append(["secret", 1]))
    with pytest.raises(SavedGraphError, match="unknown argument role 'secret'"):
        ops.load(str(other))


def test_a_library_for_another_machine_is_rebuilt_from_the_ir(tmp_path: Path) -> None:
    def other_machine(header: dict) -> None:
        for kernel in header["kernels"]:
            kernel["entries"][0]["meta"]["key"] = "0" * 64

    other = rewritten(saved(tmp_path), other_machine)
    with pytest.warns(RuntimeWarning, match="built again from its IR: the library was built for another machine"):
        graph = ops.load(str(other))
    x = np.ones((3, 33), np.float32)
    np.testing.assert_array_equal(graph(x)[0].numpy(), compiled("cpu")(x)[0].numpy())


def test_cuda_saved_for_the_other_backend_is_rebuilt_from_the_ir(tmp_path: Path) -> None:
    emulated = compiled("cuda").target.emulated

    def elsewhere(header: dict) -> None:
        for target in [header["target"], *(kernel["target"] for kernel in header["kernels"])]:
            target["emulated"] = not emulated

    other = rewritten(saved(tmp_path, "cuda"), elsewhere)
    saved_on, here = ("GPU", "CUDA emulator") if emulated else ("CUDA emulator", "GPU")
    with pytest.warns(RuntimeWarning, match=f"ran on the {saved_on}; here they run on the {here}"):
        graph = ops.load(str(other))
    x = np.ones((2, 33), np.float32)
    np.testing.assert_array_equal(graph(x)[1].numpy(), compiled("cuda")(x)[1].numpy())


def test_a_graph_saves_after_its_cache_entries_were_cleared(tmp_path: Path) -> None:
    import shutil

    xs = ops.symbol(["batch", 9])
    graph = ops.optimize(ops.trace_from(ops.exp(ops.sum(xs * 0.5, axis=1)), [xs])).build("cpu")
    for module in graph.modules:  # the entries the kernels were loaded from are gone (the cache was cleared)
        shutil.rmtree(Path(module.library_path).parent)
    path = tmp_path / "graph.hlgraph"
    graph.save(str(path))  # the kernels are built again from their IR for the file
    x = np.random.default_rng(3).standard_normal((4, 9)).astype(np.float32)
    np.testing.assert_array_equal(ops.load(str(path))(x).numpy(), graph(x).numpy())
