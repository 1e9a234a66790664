"""Tuning CUDA templates: on a GPU the candidates are checked and timed there (on arrays in its memory) and the
winner is recorded under the GPU's identity, which later builds for CUDA use; where CUDA modules run on the
emulator, tuning them is refused (its times say nothing of a GPU's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tuning_cases import CountingExecutor, check_graph, matmul_graph

import stdlib_ops as ops
from codegen.runtime.cuda_backend import backend
from stdlib_ops.templates import space as spaces
from stdlib_ops.templates.kernels.matmul_cuda import matmul_cuda
from stdlib_ops.templates.space import TuningSpace, template_ref
from stdlib_ops.tuning.machine import machine_id
from stdlib_ops.tuning.records import read_records

# the f32 CUDA matmul's space cut down to two points: 32x32 tiles, and 32x32 tiles of 4x4 threads
TWO_POINTS = TuningSpace({"block_m": (32,), "block_n": (32,), "thread_m": (4,), "thread_n": (4, 8)},
                         default={"block_m": 32, "block_n": 32, "thread_m": 4, "thread_n": 4})


@pytest.mark.skipif(backend() == "gpu", reason="built modules run the emulator only where there is no GPU")
def test_tuning_cuda_kernels_on_the_emulator_is_refused(records: Path, executor: CountingExecutor) -> None:
    with pytest.raises(RuntimeError, match=r"tune: timing CUDA kernels needs a GPU \(template .*matmul_cuda "
                                           r"declares a tuning space\)"):
        ops.tune(matmul_graph(), "cuda", executor=executor)
    assert not records.exists()


@pytest.mark.gpu
def test_cuda_candidates_are_timed_on_the_gpu_and_the_winner_is_used(records: Path, executor: CountingExecutor,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(spaces.SPACES, template_ref(matmul_cuda), TWO_POINTS)
    graph = matmul_graph()
    (result,) = ops.tune(graph, "cuda", executor=executor, repeat=1)
    assert result.source == "tuned" and TWO_POINTS.contains(result.params) and result.rejected == ()
    entry = read_records(records)[machine_id("cuda")][result.shape_class]
    assert machine_id("cuda") != machine_id("cpu") and entry["params"] == result.params
    compiled = graph.build("cuda")
    assert compiled.schedules == [result.params]
    check_graph(compiled, graph)
