"""`script_module` blocks open in several threads at once each collect their own thread's functions (templates
are instantiated concurrently, e.g. by a tuner's thread pool or a Dask worker's threads)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from hidet_lang import attrs, f32, script, script_module


def test_blocks_open_in_two_threads_at_once_keep_their_own_functions() -> None:
    both_open = threading.Barrier(2)

    def build(value: float) -> list[str]:
        with script_module() as module:
            both_open.wait(timeout=30)

            @script
            def kernel(out: f32[1]):
                attrs.func_kind = "cpu_kernel"
                out[0] = value

            both_open.wait(timeout=30)
        return [f.name for f in module.ir_module().functions]

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(build, [1.0, 2.0]))
    assert results == [["kernel"], ["kernel"]]
