"""A tuning run on a Dask cluster (`distributed.LocalCluster`, one worker process of two threads) through the
executor of its client: the record it writes is the same kind of winner as a local run's (a point of the space,
checked, for this machine and the same shape class)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tuning_cases import matmul_graph

import stdlib_ops as ops
from stdlib_ops.templates.space import TuningSpace
from stdlib_ops.tuning.machine import machine_id
from stdlib_ops.tuning.records import read_records

distributed = pytest.importorskip("distributed")


def test_tuning_on_a_dask_cluster_records_the_same_kind_of_winner(
        records: Path, small_space: TuningSpace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = matmul_graph()
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        (on_dask,) = ops.tune(graph, executor=client.get_executor())
    dask_records = read_records(records)
    monkeypatch.setenv("HIDET_LANG_CACHE_DIR", str(tmp_path / "local"))
    (local,) = ops.tune(graph, executor=None)
    local_records = read_records(tmp_path / "local" / records.name)
    assert on_dask.source == local.source == "tuned"
    assert list(dask_records) == list(local_records) == [machine_id()]
    assert list(dask_records[machine_id()]) == list(local_records[machine_id()]) == [on_dask.shape_class]
    for entry in (dask_records[machine_id()][on_dask.shape_class], local_records[machine_id()][local.shape_class]):
        assert small_space.contains(entry["params"])
        assert entry["checked"] == len(small_space.points()) and entry["rejected"] == 0
