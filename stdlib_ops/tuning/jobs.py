"""The jobs a tuning run sends to an executor's workers: module-level functions of plain, picklable data.

A `Candidate` names a template (`module:qualname`), its concrete sizes, its options and one point of its tuning
space; a worker rebuilds the kernel from that alone (`candidate_module`), in whatever thread, process or machine
it runs (a local thread pool, a process pool, a Dask worker). `compile_candidate` is the first phase of a tuning
run: it compiles one candidate, which fills the compilation cache of the worker's machine. `time_candidates` is
the second: on one machine, it builds the candidates of one task (cache hits where the first phase ran there),
runs each on the same random inputs, checks each one's arrays after the call against the first candidate's (the
default point: a candidate that computes anything else is rejected, never timed), and times the others one after
the other, each by the median of repeated samples after a warm-up call. `cubin_of_candidate` compiles a CUDA
candidate for a tuning bundle (`stdlib_ops.tuning.bundle`) and returns its cubin.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from codegen import build_module
from codegen.runtime import DeviceArray, synchronize, to_device
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.types import TensorType
from hidet_lang.target import Target
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.templates.space import resolve_template
from stdlib_ops.tuning.machine import machine_id

SAMPLE_SECONDS = 0.01
"""A timing sample lasts at least this long: as many calls as fit, timed together."""


@dataclass(frozen=True)
class Candidate:
    """One point of a template's space for one problem: plain data, picklable to any worker."""

    template: str
    sizes: tuple[tuple[str, int], ...]
    options: tuple[tuple[str, Any], ...]
    params: tuple[tuple[str, Any], ...]
    target: Target


@dataclass(frozen=True)
class TimingJob:
    """The candidates of one task (the default point first), timed on one machine by `repeat` samples each."""

    candidates: tuple[Candidate, ...]
    repeat: int
    seed: int = 0


@dataclass(frozen=True)
class TimingOutcome:
    """What `time_candidates` found, per candidate in order: its median seconds per call, or None with the reason
    it was not timed (it failed to build or run, or computed another result than the default); and the
    `machine_id` of the worker that timed them."""

    machine: str
    seconds: tuple[float | None, ...]
    problems: tuple[str | None, ...]


def candidate_module(candidate: Candidate) -> IRModule:
    """The module of `candidate`: its template, resolved in this process, instantiated from its plain data."""
    template = resolve_template(candidate.template)
    return template(**dict(candidate.sizes), **dict(candidate.options), **dict(candidate.params)).ir_module()


def compile_candidate(candidate: Candidate) -> str | None:
    """Compile `candidate` (first phase): None when it compiled, else why not (the template refused the point or
    the compiler failed), as text."""
    try:
        build_module(candidate_module(candidate), candidate.target)
    except Exception as exc:  # noqa: BLE001 - a candidate that cannot be built is reported, not raised
        return f"{type(exc).__name__}: {exc}"
    return None


def cubin_of_candidate(candidate: Candidate) -> tuple[str, bytes] | str:
    """Compile the CUDA `candidate` for its target's architecture, on any machine (NVRTC needs no GPU), for a tuning
    bundle: its kernels' CUDA source and cubin, or why it could not be built, as text."""
    try:
        built = build_module(candidate_module(candidate), candidate.target)
        return built.compiled_source("cuda"), built.cubin  # as compiled: the key of the cubin's cache entry
    except Exception as exc:  # noqa: BLE001 - a candidate that cannot be built is reported, not raised
        return f"{type(exc).__name__}: {exc}"


def time_candidates(job: TimingJob) -> TimingOutcome:
    """Check and time the candidates of `job` on this machine (second phase; see the module docstring); CUDA
    candidates on its GPU, on arrays already there (each sample ends when the GPU has finished its calls). Nothing
    else should run on the machine meanwhile: the tuner submits one timing job at a time."""
    kernels: list[Any] = []
    problems: list[str | None] = []
    inputs: list[np.ndarray] | None = None
    for k, candidate in enumerate(job.candidates):  # every build first, so that no compilation overlaps a timing
        try:
            module = candidate_module(candidate)
            kernels.append(build_module(module, candidate.target))
            problems.append(None)
        except Exception as exc:  # noqa: BLE001 - reported per candidate
            kernels.append(None)
            problems.append(f"failed to build: {type(exc).__name__}: {exc}")
            continue
        if k == 0:
            inputs = _random_arguments(module, job.seed)
    reference: list[np.ndarray] | None = None
    seconds: list[float | None] = []
    for k, kernel in enumerate(kernels):
        if kernel is None or inputs is None:
            problems[k] = problems[k] or "not checked: the default candidate failed to build"
            seconds.append(None)
            continue
        try:
            result = _run_once(kernel, inputs)
        except Exception as exc:  # noqa: BLE001 - reported per candidate
            problems[k] = f"failed to run: {type(exc).__name__}: {exc}"
            seconds.append(None)
            continue
        if k == 0:
            reference = result
        mismatch = _mismatch(result, reference)
        if mismatch is not None:
            problems[k] = mismatch
            seconds.append(None)
            continue
        seconds.append(_median_seconds(kernel, inputs, job.repeat))
    machine = machine_id(job.candidates[0].target) if job.candidates else machine_id()
    return TimingOutcome(machine, tuple(seconds), tuple(problems))


def _random_arguments(module: IRModule, seed: int) -> list[np.ndarray]:
    """One array per parameter of the kernel of `module` (every candidate of a task takes the same ones), uniform
    in [-1, 1]."""
    rng = np.random.default_rng(seed)
    arrays = []
    for param in the_kernel(module).params:
        t = param.type
        if not isinstance(t, TensorType):
            raise ValueError(f"tune: a candidate's kernel takes the scalar '{param.name}'; every size must be known")
        shape = tuple(int(getattr(d, "value", d)) for d in t.shape)  # IR constants, or ints
        arrays.append(rng.uniform(-1.0, 1.0, shape).astype(t.dtype.numpy_name))
    return arrays


def _run_once(kernel: Callable[..., Any], inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The arrays after one call of `kernel` on copies of `inputs` (on the device of a CUDA module's kernel)."""
    arrays = _copies(kernel, inputs)
    kernel(*arrays)
    return [a.numpy() if isinstance(a, DeviceArray) else a for a in arrays]


def _copies(kernel: Callable[..., Any], inputs: list[np.ndarray]) -> list[Any]:
    """Copies of `inputs` where `kernel` computes: in GPU memory for a CUDA module on a GPU, numpy arrays else."""
    if getattr(kernel, "on_gpu", False):
        return [to_device(a) for a in inputs]
    return [a.copy() for a in inputs]


def _mismatch(result: list[np.ndarray], reference: list[np.ndarray] | None) -> str | None:
    """None when `result` equals `reference` within the rounding of a reordered sum, else why not."""
    if reference is None:
        return "not checked: the default candidate failed"
    for k, (got, want) in enumerate(zip(result, reference)):
        tolerance = 1e-2 if got.dtype.itemsize < 4 else 1e-4
        scale = float(np.max(np.abs(want.astype(np.float64)))) if want.size else 0.0
        if not np.allclose(got, want, rtol=tolerance, atol=tolerance * max(1.0, scale), equal_nan=True):
            error = float(np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64))))
            return f"wrong result: argument {k} differs from the default candidate's by up to {error:.3g}"
    return None


def _median_seconds(kernel: Callable[..., Any], inputs: list[np.ndarray], repeat: int) -> float:
    """Median seconds per call of `kernel` over `repeat` samples, after a warm-up call that sizes the samples."""
    arrays = _copies(kernel, inputs)
    start = time.perf_counter()
    kernel(*arrays)
    synchronize()
    calls = max(1, int(SAMPLE_SECONDS / max(time.perf_counter() - start, 1e-9)))
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            kernel(*arrays)
        synchronize()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)
