"""Tuning in two halves on the emulator: a bundle built where no GPU runs (the candidates' cubins from NVRTC, a
manifest), then timed (each candidate checked, then timed) with its winner recorded for the machine that timed it
and used by the next build; records shipped in the package are found by the GPU's identity (its name and
architecture), used by default there, and a user's own record overrides them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tuning_cases import CountingExecutor, matmul_graph

import stdlib_ops as ops
from hidet_lang.target import Target
from stdlib_ops.templates import space as spaces
from stdlib_ops.templates.kernels.matmul_cuda import matmul_cuda
from stdlib_ops.templates.registry import schedule_params
from stdlib_ops.templates.space import TuningSpace, template_ref
from stdlib_ops.tuning import records as records_module
from stdlib_ops.tuning.machine import machine_id
from stdlib_ops.tuning.records import RECORDS_VERSION, read_records, recorded_winner, write_record
from stdlib_ops.tuning.tune import tunable_tasks

# the f32 CUDA matmul's space cut down to two points: 32x32 tiles of 4x4 and of 4x8 threads
TWO_POINTS = TuningSpace({"block_m": (32,), "block_n": (32,), "thread_m": (4,), "thread_n": (4, 8)},
                         default={"block_m": 32, "block_n": 32, "thread_m": 4, "thread_n": 4})
OTHER_POINT = {"block_m": 32, "block_n": 32, "thread_m": 4, "thread_n": 8}


@pytest.fixture
def two_points(monkeypatch: pytest.MonkeyPatch) -> TuningSpace:
    monkeypatch.setitem(spaces.SPACES, template_ref(matmul_cuda), TWO_POINTS)
    return TWO_POINTS


def test_a_bundle_built_without_a_gpu_is_timed_recorded_and_used(records: Path, executor: CountingExecutor,
                                                                  two_points: TuningSpace, tmp_path: Path) -> None:
    graph = matmul_graph()
    bundle = tmp_path / "bundle"
    (built,) = ops.tune(graph, "cuda:sm_80", bundle=bundle, executor=executor)
    assert built.source == "bundled" and built.rejected == () and executor.submitted == 2
    manifest = json.loads((bundle / "manifest.json").read_text())
    (task,) = manifest["tasks"]
    assert task["shape_class"] == built.shape_class and task["default"] == TWO_POINTS.default
    cubins = [bundle / c["cubin"] for c in task["candidates"]]
    assert len(cubins) == 2 and all(c.read_bytes().startswith(b"\x7fELF") for c in cubins)
    assert not records.exists()  # nothing is timed where the bundle is built

    (timed,) = ops.tuning.time_bundle(bundle, repeat=1)
    assert timed.source == "tuned" and TWO_POINTS.contains(timed.params) and timed.rejected == ()
    entry = read_records(records)[machine_id("cuda")][timed.shape_class]
    assert entry["params"] == timed.params and entry["checked"] == 2
    ((_, binding, _),) = tunable_tasks(graph, Target.of("cuda"))
    assert schedule_params(binding, Target.of("cuda")) == timed.params  # what the next build instantiates


def test_shipped_records_are_found_by_the_gpus_identity_and_the_users_override_them(
        records: Path, two_points: TuningSpace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    monkeypatch.setattr(records_module, "SHIPPED_DIR", shipped)
    monkeypatch.setattr(records_module, "machine_id", lambda target="cpu": "NVIDIA H200 sm_90a")
    ((key, binding, space),) = tunable_tasks(matmul_graph(), Target.of("cuda"))
    assert recorded_winner(binding, space, "cuda") is None  # nothing shipped: the default point is built

    def ship(name: str, machine: str, params: dict[str, int]) -> None:
        (shipped / name).write_text(json.dumps({"version": RECORDS_VERSION, "machines": {machine: {key: {
            "params": params, "seconds": 1e-5, "default_seconds": 2e-5, "checked": 2, "rejected": 0}}}}))

    ship("NVIDIA_H100.json", "NVIDIA H100 80GB HBM3 sm_90a", TWO_POINTS.default)
    ship("NVIDIA_H200.json", "NVIDIA H200 sm_90a", OTHER_POINT)
    assert recorded_winner(binding, space, "cuda") == OTHER_POINT
    assert schedule_params(binding, Target.of("cuda")) == OTHER_POINT  # what a build on that GPU instantiates
    write_record(records, "NVIDIA H200 sm_90a", key, {"params": TWO_POINTS.default})
    assert recorded_winner(binding, space, "cuda") == TWO_POINTS.default  # the user's own record wins
