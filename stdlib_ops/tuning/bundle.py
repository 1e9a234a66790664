"""Tuning in two halves: the candidates built on any machine, timed on the GPU in one batch.

`tune(subject, 'cuda:sm_90a', bundle=DIR)` (`build_bundle`) compiles every candidate of every tunable task of
`subject` for the target's architecture, through the tuning executor (a local pool, worker processes, a Dask
cluster: `jobs.cubin_of_candidate` is a module-level function of plain data), without a GPU: NVRTC needs none. It
saves a bundle directory:

```
DIR/manifest.json   {"version": 1, "target": "cuda:sm_90a", "package_version": "...", "tasks": [
                      {"shape_class": "...", "default": {...}, "candidates": [
                        {"template": "...", "sizes": [...], "options": [...], "params": [...], "target": "...",
                         "cubin": "cubins/<sha256>.cubin", "problem": null}, ...]}]}
DIR/cubins/<sha256>.cu, .cubin   each candidate's kernels' CUDA source and NVRTC's cubin
```

On the GPU, `time_bundle(DIR)` (or `python -m stdlib_ops.tuning time DIR`) installs the cubins in the compilation
cache under the keys this machine's builds look up (`codegen.toolchain.PortableEntry`: no NVRTC compile, whatever
the toolkit here), builds each candidate's host code in parallel, then checks each candidate against the default
point and times the correct ones, one task at a time, as `tune` does; the winners are recorded for this machine
(`machine_id`: the GPU's name and architecture) in the user's records file (`records.records_path()`). Copying
those records into `stdlib_ops/tuning/shipped/` ships them (see `records`).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Mapping
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codegen.toolchain import PortableEntry, install_entry
from hidet_lang.target import Target
from hidet_lang.version import __version__
from stdlib_ops.task import Task
from stdlib_ops.tensor import Tensor
from stdlib_ops.tuning.jobs import Candidate, cubin_of_candidate
from stdlib_ops.tuning.timing import (
    Pending,
    TuningResult,
    candidates_of,
    executor_or_pool,
    progress,
    time_and_record,
    tunable_tasks,
)

if TYPE_CHECKING:
    from stdlib_ops.graph.flow_graph import FlowGraph

MANIFEST = "manifest.json"
BUNDLE_VERSION = 1


def build_bundle(subject: FlowGraph | Tensor | Task, target: Target | str, path: str | os.PathLike[str], *,
                 sizes: Mapping[str, int] | None = None, executor: Executor | None = None,
                 limit: int | None = None) -> list[TuningResult]:
    """Compile every candidate of `subject`'s tunable tasks for the CUDA `target` through `executor` (default: a
    local thread pool) and save them as a bundle in the directory `path` (see the module docstring); one result a
    task, its source 'bundled', its default point as params and the candidates that failed to build rejected.
    `limit` keeps the first points of each space only (the default first): a smoke run's bundle."""
    target = Target.of(target)
    if not target.is_cuda or target.arch is None:
        raise ValueError(f"tune: a bundle is built for a CUDA architecture, e.g. 'cuda:sm_90a', not '{target}'")
    tasks = [(key, Pending(dict(space.default), candidates_of(binding, space, target, sizes)[:limit]))
             for key, binding, space in tunable_tasks(subject, target)]
    everything = [c for _, job in tasks for c in job.candidates]
    with executor_or_pool(executor, len(everything)) as pool:
        futures = [pool.submit(cubin_of_candidate, c) for c in everything]
        built = dict(zip(everything, (f.result() for f in progress(futures, "tuning: compiling", "candidate"))))
    root = Path(path)
    (root / "cubins").mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"version": BUNDLE_VERSION, "target": str(target), "package_version": __version__,
                                "tasks": []}
    results = []
    for key, job in tasks:
        entries = []
        for candidate in job.candidates:
            entry: dict[str, Any] = {"template": candidate.template, "sizes": candidate.sizes,
                                     "options": candidate.options, "params": candidate.params,
                                     "target": str(candidate.target), "cubin": None, "problem": None}
            outcome = built[candidate]
            if isinstance(outcome, str):
                entry["problem"] = outcome
            else:
                entry["cubin"] = _save_cubin(root, *outcome)
            entries.append(entry)
        manifest["tasks"].append({"shape_class": key, "default": job.default, "candidates": entries})
        rejected = tuple((dict(c["params"]), f"failed to build: {c['problem']}") for c in entries if c["problem"])
        results.append(TuningResult(key, dict(job.default), "bundled", rejected=rejected))
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return results


def time_bundle(path: str | os.PathLike[str], *, executor: Executor | None = None,
                repeat: int = 5) -> list[TuningResult]:
    """Time the bundle in the directory `path` on this machine's GPU and record the winners (see the module
    docstring); one result a task, in the bundle's order. Candidates that failed to build when the bundle was made
    are rejected without a try; a cubin that cannot be installed here (another package version) is compiled again."""
    root = Path(path)
    manifest = json.loads((root / MANIFEST).read_text())
    if manifest.get("version") != BUNDLE_VERSION:
        raise ValueError(f"{root / MANIFEST}: not a version {BUNDLE_VERSION} tuning bundle")
    arch = Target.of(manifest["target"]).arch
    pending: dict[str, Pending] = {}
    unbuilt: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for task in manifest["tasks"]:
        candidates = []
        for entry in task["candidates"]:
            candidate = Candidate(entry["template"], _pairs(entry["sizes"]), _pairs(entry["options"]),
                                  _pairs(entry["params"]), Target.of(entry["target"]))
            if entry["problem"]:
                unbuilt.setdefault(task["shape_class"], []).append((dict(candidate.params), entry["problem"]))
                continue
            _install(root / entry["cubin"], {"arch": arch, "package_version": manifest["package_version"]})
            candidates.append(candidate)
        if candidates and dict(candidates[0].params) == task["default"]:
            pending[task["shape_class"]] = Pending(task["default"], candidates)
    results = time_and_record(pending, executor, repeat)
    ordered = []
    for task in manifest["tasks"]:
        key = task["shape_class"]
        result = results.get(key) or TuningResult(key, task["default"], "default")
        failed = tuple((params, f"failed to build: {problem}") for params, problem in unbuilt.get(key, []))
        ordered.append(TuningResult(result.shape_class, result.params, result.source, result.seconds,
                                    result.default_seconds, failed + result.rejected))
    return ordered


def _install(cubin: Path, meta: dict[str, Any]) -> None:
    """Put the bundle's `cubin` (its source beside it) in this machine's compilation cache; one that does not apply
    here (another package version) is left out with a warning, and the candidate's build compiles it."""
    entry = PortableEntry("kernel.cubin", cubin.with_suffix(".cu").read_text(), meta, cubin.read_bytes())
    try:
        install_entry(entry, version=__version__)
    except ValueError as exc:
        warnings.warn(f"the tuning bundle's {cubin.name} is compiled again here: {exc}", RuntimeWarning, stacklevel=3)


def _save_cubin(root: Path, source: str, cubin: bytes) -> str:
    """Write a candidate's CUDA source and cubin into the bundle at `root` (named by the cubin's hash); the cubin's
    path relative to `root`."""
    name = hashlib.sha256(cubin).hexdigest()[:32]
    (root / "cubins" / f"{name}.cu").write_text(source)
    (root / "cubins" / f"{name}.cubin").write_bytes(cubin)
    return f"cubins/{name}.cubin"


def _pairs(items: list[list[Any]]) -> tuple[tuple[str, Any], ...]:
    """(name, value) pairs read back from JSON, list values as the tuples they were."""
    return tuple((name, tuple(value) if isinstance(value, list) else value) for name, value in items)
