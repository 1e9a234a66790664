"""Tuning records: they round-trip and merge; concurrent writers lose nothing; a corrupt, truncated, other-version
or malformed file is ignored with a warning naming it, and tuning then works and replaces it; an entry whose
parameters are not a point of the template's space is ignored with a warning (the default point is built); a
record of a template under the module path it had before it moved matches nothing (kept, never read); shape
classes and machine identities are as documented."""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from tuning_cases import matmul_graph

import stdlib_ops as ops
from hidet_lang.target import Target
from stdlib_ops.graph.build import as_built
from stdlib_ops.templates.registry import binding_of
from stdlib_ops.templates.space import TuningSpace
from stdlib_ops.tuning.machine import machine_id
from stdlib_ops.tuning.records import RECORDS_VERSION, read_records, write_record
from stdlib_ops.tuning.shapes import REPRESENTATIVE_SIZE, concrete_sizes, shape_class, size_bucket

ENTRY = {"params": {"kc": 8, "nc": 32, "min_tiles": 1}, "seconds": 1e-5, "default_seconds": 2e-5,
         "checked": 2, "rejected": 0, "sizes": {"batch": 1, "m": 256, "n": 24, "k": 40}}


def test_records_round_trip_and_merge(records: Path) -> None:
    write_record(records, "machine A", "key 1", ENTRY)
    write_record(records, "machine A", "key 2", {**ENTRY, "seconds": 3e-5})
    write_record(records, "machine B", "key 1", ENTRY)
    assert read_records(records) == {"machine A": {"key 1": ENTRY, "key 2": {**ENTRY, "seconds": 3e-5}},
                                     "machine B": {"key 1": ENTRY}}
    data = json.loads(records.read_text())
    assert data["version"] == RECORDS_VERSION
    assert [p.name for p in records.parent.iterdir() if p.name.endswith(".tmp")] == []


def _write_keys(path: str, first: int) -> None:
    for k in range(first, first + 10):
        write_record(Path(path), "machine", f"key {k}", {**ENTRY, "seconds": float(k)})


def test_concurrent_writers_lose_no_record(records: Path) -> None:
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        list(pool.map(_write_keys, [str(records)] * 4, [0, 10, 20, 30]))
    assert sorted(read_records(records)["machine"]) == sorted(f"key {k}" for k in range(40))


CORRUPT = {
    "garbage": b"\x00\xff not json at all",
    "truncated": json.dumps({"version": RECORDS_VERSION, "machines": {}}).encode()[:-3],
    "wrong version": json.dumps({"version": RECORDS_VERSION + 1, "machines": {}}).encode(),
    "not an object": b"[1, 2, 3]",
}


@pytest.mark.parametrize("content", CORRUPT.values(), ids=CORRUPT.keys())
def test_a_corrupt_records_file_is_ignored_with_a_warning_and_tuning_replaces_it(
        records: Path, content: bytes, small_space: TuningSpace, executor: object) -> None:
    records.parent.mkdir(parents=True)
    records.write_bytes(content)
    graph = matmul_graph()
    with pytest.warns(RuntimeWarning, match=f"ignoring the tuning records file {records}"):
        assert read_records(records) == {}
        (result,) = ops.tune(graph, executor=executor)
    assert result.source == "tuned" and small_space.contains(result.params)
    assert read_records(records)[machine_id()][result.shape_class]["params"] == result.params


def test_a_malformed_entry_is_ignored_with_a_warning(records: Path) -> None:
    records.parent.mkdir(parents=True)
    records.write_text(json.dumps({"version": RECORDS_VERSION,
                                   "machines": {"m": {"bad": {"params": [1]}, "good": ENTRY}, "n": 3}}))
    with pytest.warns(RuntimeWarning, match=str(records)):
        assert read_records(records) == {"m": {"good": ENTRY}}


def test_an_entry_outside_the_space_is_ignored_and_the_default_point_built(
        records: Path, small_space: TuningSpace, executor: object) -> None:
    graph = matmul_graph()
    key = shape_class(binding_of(graph.nodes[0].task, Target.of("cpu")))
    write_record(records, machine_id(), key, {**ENTRY, "params": {"kc": 12, "nc": 32, "min_tiles": 1}})
    with pytest.warns(RuntimeWarning, match=f"ignoring the tuning record .* in {records}"):
        compiled = graph.build("cpu")
    assert compiled.schedules == [small_space.default]
    (result,) = ops.tune(graph, executor=executor)  # no trusted record: tuned again
    assert result.source == "tuned" and small_space.contains(result.params)


def test_a_record_naming_a_template_by_an_older_module_path_is_kept_and_not_matched(
        records: Path, small_space: TuningSpace, executor: object) -> None:
    graph = matmul_graph()
    built = as_built(graph, Target.of("cpu"))  # the task the build compiles: the product by packed weights
    key = shape_class(binding_of(built.nodes[0].task, Target.of("cpu")))
    old_key = key.replace("stdlib_ops.templates.kernels.", "stdlib_ops.templates.")
    assert old_key != key
    write_record(records, machine_id(), old_key, {**ENTRY, "params": small_space.points()[1]})
    assert graph.build("cpu").schedules == [small_space.default]
    (result,) = ops.tune(graph, executor=executor)
    assert result.source == "tuned" and result.shape_class == key
    assert sorted(read_records(records)[machine_id()]) == sorted([old_key, key])


def test_shape_classes_round_known_sizes_up_to_powers_of_two_and_hide_symbolic_ones() -> None:
    assert [size_bucket(s) for s in (1, 2, 3, 100, 128, 129)] == [1, 2, 4, 128, 128, 256]
    binding = binding_of(matmul_graph(n=24, k=40).nodes[0].task, Target.of("cpu"))
    assert shape_class(binding) == ("stdlib_ops.templates.kernels.matmul_cpu:matmul_cpu[batch=1,m=?,n=32,k=64]"
                                    "(dtype='float32')")
    assert concrete_sizes(binding, {}) == {"batch": 1, "m": REPRESENTATIVE_SIZE, "n": 24, "k": 40}
    assert concrete_sizes(binding, {"rows": 7})["m"] == 7
    with pytest.raises(ValueError, match="'rows'"):
        concrete_sizes(binding, {"rows": 0})


def test_the_machine_identity_names_the_cores() -> None:
    assert machine_id().endswith(f" {os.cpu_count()} cores")
    assert machine_id() == machine_id()
