"""Compile latency and call overhead of hidet-lang, side by side with Numba (when installed).

Prints one table: `import` time, the first `script_module()` of a process (which loads the code generator: the
language itself loads none), cold build (empty cache), warm build in a fresh process (disk cache), build again
in the same process (memory), and the per-call overhead of a 3-argument call with small numpy arrays.
Fresh-process numbers are medians over several child processes, run with Python's bytecode cache on (as an
installed package has it, whatever PYTHONDONTWRITEBYTECODE says here); call overheads are medians of repeated
loops. The kernels are those of examples/quickstart.py (a vector add and a 256^3 tiled matmul).

Run: python examples/benchmarks/compile_latency.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import loop_time, medians  # examples/benchmarks/timing.py, beside this script

EXAMPLES = Path(__file__).resolve().parent.parent
RUNS = 5


# ------------------------------------------------------------------------------------------------ children
def child_import(package: str) -> dict[str, float]:
    start = time.perf_counter()
    module = __import__(package)
    times = {"seconds": time.perf_counter() - start}
    if package == "hidet_lang":
        start = time.perf_counter()
        module.script_module()
        times["first_module"] = time.perf_counter() - start
    return times


def child_build() -> dict[str, float]:
    import numpy  # noqa: F401  (a user's program has numpy loaded before it builds anything)

    sys.path.insert(0, str(EXAMPLES))
    import quickstart

    times = {}
    for name, module in (("vector_add", quickstart.vector_module), ("matmul", quickstart.matmul_module)):
        start = time.perf_counter()
        module.build()
        times[name] = time.perf_counter() - start
    start = time.perf_counter()
    quickstart.vector_module.build()
    times["again"] = time.perf_counter() - start
    return times


def child_numba_build() -> dict[str, float]:
    import numba
    import numpy  # noqa: F401

    times = {}
    start = time.perf_counter()

    @numba.njit("void(float32[::1], float32[::1], float32[::1])", cache=True, parallel=True)
    def vector_add(a, b, c):
        for i in numba.prange(a.shape[0]):
            c[i] = a[i] + b[i]

    times["vector_add"] = time.perf_counter() - start
    start = time.perf_counter()

    @numba.njit("void(float32[:, ::1], float32[:, ::1], float32[:, ::1])", cache=True, parallel=True)
    def matmul(a, b, c):
        m, k = a.shape
        p = b.shape[1]
        for ti in numba.prange(m // 16):
            for tj in range(p // 16):
                acc = numpy.zeros((16, 16), numpy.float32)
                for kk in range(k):
                    for i in range(16):
                        for j in range(16):
                            acc[i, j] += a[ti * 16 + i, kk] * b[kk, tj * 16 + j]
                for i in range(16):
                    for j in range(16):
                        c[ti * 16 + i, tj * 16 + j] = acc[i, j]

    times["matmul"] = time.perf_counter() - start
    return times


def run_child(mode: str, cache: str | None = None) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if cache is not None:
        env["HIDET_LANG_CACHE_DIR"] = cache
        env["NUMBA_CACHE_DIR"] = cache
    out = subprocess.run([sys.executable, __file__, "--child", mode], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def cold_and_warm(mode: str) -> tuple[dict[str, float], dict[str, float]]:
    """Median times of `mode` with an empty cache, then again in a new process with that cache filled."""
    cold, warm = [], []
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory(prefix="hidet_lang_bench_") as cache:
            cold.append(run_child(mode, cache))
            warm.append(run_child(mode, cache))
    return medians(cold), medians(warm)


# ------------------------------------------------------------------------------------------------ call overhead
def per_call_overheads() -> dict[str, float]:
    import numpy as np

    import hidet_lang as hidet
    from hidet_lang import attrs, f32

    with hidet.script_module() as module:

        @hidet.script
        def add16(a: f32[16], b: f32[16], c: f32[16]):
            attrs.func_kind = "public"
            for i in range(16):
                c[i] = a[i] + b[i]

    built = module.build()
    a, b, c = (np.ones(16, np.float32) for _ in range(3))
    raw = built._lib.add16
    pointers = [x.ctypes.data for x in (a, b, c)]
    results = {
        "hidet-lang": loop_time(lambda: built(a, b, c)),
        "ctypes (no checks)": loop_time(lambda: raw(*pointers)),
        "numpy np.add(out=)": loop_time(lambda: np.add(a, b, out=c)),
    }
    try:
        import numba

        @numba.njit("void(float32[::1], float32[::1], float32[::1])")
        def nb_add16(x, y, z):
            for i in range(16):
                z[i] = x[i] + y[i]

        results["numba"] = loop_time(lambda: nb_add16(a, b, c))
    except ImportError:
        pass
    return results


# ------------------------------------------------------------------------------------------------ main
def main() -> None:
    try:
        import numba  # noqa: F401

        has_numba = True
    except ImportError:
        has_numba = False
    ours = medians([run_child("import:hidet_lang") for _ in range(RUNS)])
    imports = {"hidet-lang": ours["seconds"]}
    if has_numba:
        imports["numba"] = statistics.median(run_child("import:numba")["seconds"] for _ in range(RUNS))
    cold, warm = cold_and_warm("build")
    nb_cold, nb_warm = cold_and_warm("numba_build") if has_numba else ({}, {})
    calls = per_call_overheads()

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x * 1e3:.2f} ms"

    rows = [
        ("import", ms(imports["hidet-lang"]), ms(imports.get("numba")), "<= 300 ms"),
        ("first script_module(): loads codegen, numpy", ms(ours["first_module"]), "-", "-"),
        ("cold build: vector_add", ms(cold["vector_add"]), ms(nb_cold.get("vector_add")), "<= 300 ms"),
        ("cold build: matmul", ms(cold["matmul"]), ms(nb_cold.get("matmul")), "<= 300 ms"),
        ("warm build, new process: vector_add", ms(warm["vector_add"]), ms(nb_warm.get("vector_add")), "<= 1.5 ms"),
        ("warm build, new process: matmul", ms(warm["matmul"]), ms(nb_warm.get("matmul")), "<= 1.5 ms"),
        ("build again, same process", f"{cold['again'] * 1e6:.1f} us", "-", "<= 100 us"),
        ("per call, 3 arrays of 16 floats", f"{calls['hidet-lang'] * 1e6:.2f} us",
         f"{calls['numba'] * 1e6:.2f} us" if "numba" in calls else "-", "<= 5 us"),
    ]
    print(f"medians of {RUNS} fresh processes (builds, imports) and of 7 loops of 20000 calls (call overhead)\n")
    print(f"{'':<38}{'hidet-lang':>14}{'numba':>14}{'target':>12}")
    for name, ours, peer, target in rows:
        print(f"{name:<38}{ours:>14}{peer:>14}{target:>12}")
    print("\ncall overhead floor and reference:")
    for name in ("ctypes (no checks)", "numpy np.add(out=)"):
        print(f"  {name:<24}{calls[name] * 1e6:8.2f} us")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        mode = sys.argv[2]
        if mode.startswith("import:"):
            result = child_import(mode.split(":", 1)[1])
        elif mode == "build":
            result = child_build()
        else:
            result = child_numba_build()
        print(json.dumps(result))
    else:
        main()
