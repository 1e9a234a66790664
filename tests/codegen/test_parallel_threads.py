"""Parallel loops on a shared machine, the mechanism (never wall time): the generated C asks `hl_cpu_threads`
(cpu_threads.h) for a loop's thread count unless the loop names one, a loop with little work runs on one thread,
the count leaves out the cores other processes hold and OMP_NUM_THREADS overrides it (caps it, with
OMP_DYNAMIC=true), and the OpenMP runtime the compiled libraries load waits passively unless the user chose a
policy, the process environment left as it was."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np

import hidet_lang as hidet
from codegen.emit.parallel_work import MIN_PARALLEL_WORK
from hidet_lang import attrs, f32, grid, i32

N = 1 << 18  # enough work for several threads (codegen.emit.parallel_work)


def _module(loop: str):
    with hidet.script_module() as module:
        @hidet.script
        def add_one(a: f32[N], c: f32[N]):
            attrs.func_kind = "public"
            for i in grid(N, attrs=loop):
                c[i] = a[i] + 1.0
    return module.build()


def _call(built) -> None:
    a = np.arange(N, dtype=np.float32)
    c = np.empty_like(a)
    built(a, c)
    np.testing.assert_array_equal(c, a + 1)


def test_a_parallel_loop_asks_for_its_thread_count_unless_it_names_one() -> None:
    chosen, named, serial = _module("p"), _module("p2"), _module(".")
    assert "num_threads(hl_cpu_threads(1))" in chosen.source() and "cpu_threads.h" in chosen.source()
    assert "num_threads(2)" in named.source()
    assert "cpu_threads.h" not in serial.source() and "omp parallel" not in serial.source()
    assert chosen.threads_used() == 0  # before its first parallel loop
    _call(chosen)
    assert 1 <= chosen.threads_used() <= len(os.sched_getaffinity(0))
    _call(serial)
    assert serial.threads_used() is None


def test_a_loop_with_little_work_runs_on_one_thread() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def add_one(n: i32, a: f32[n], c: f32[n]):  # noqa: F821 (parameters)
            attrs.func_kind = "public"
            for i in grid(n, attrs="p"):
                c[i] = a[i] + 1.0

        @hidet.script
        def small(a: f32[1000], c: f32[1000]):
            attrs.func_kind = "public"
            for i in grid(1000, attrs="p"):
                c[i] = a[i] + 1.0

    built = module.build()
    assert f"hl_cpu_threads(((long long)(n) - (long long)(0)) * 1LL >= {MIN_PARALLEL_WORK}LL)" in built.source()
    assert "hl_cpu_threads(0)" in built.source()
    built["small"](np.zeros(1000, np.float32), np.zeros(1000, np.float32))
    assert built.threads_used() == 1
    for n, most in [(MIN_PARALLEL_WORK, len(os.sched_getaffinity(0))), (MIN_PARALLEL_WORK - 1, 1)]:
        a = np.ones(n, np.float32)
        c = np.empty_like(a)
        built["add_one"](n, a, c)
        assert 1 <= built.threads_used() <= most
        np.testing.assert_array_equal(c, a + 1)


def threads_with_every_core_busy(built) -> int:
    """The threads `built`'s parallel loop took, called while a spinning process holds every core."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(len(os.sched_getaffinity(0)))]
    try:
        time.sleep(0.3)  # every spinner is running: no core is free
        _call(built)
        time.sleep(0.02)  # past the count's 10 ms period
        _call(built)
        return built.threads_used()
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def test_cores_other_processes_hold_are_left_to_them() -> None:
    assert threads_with_every_core_busy(_module("p")) == 1


def _child(code: str, **env: str) -> str:
    """The output of `code` run in a fresh process with `env` added (none of the OpenMP settings inherited)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env={**base, **env}, capture_output=True,
                          text=True, timeout=300, cwd=os.path.dirname(__file__))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


PROGRAM = """
    import ctypes, os, sys
    sys.path.insert(0, '.')
    from test_parallel_threads import _call, _module
    built = _module('p')
    _call(built)
    print('environment:', os.environ.get('OMP_WAIT_POLICY'))
    print('threads used:', built.threads_used())
    ctypes.CDLL('libgomp.so.1').omp_display_env(0)
"""


def test_the_openmp_runtime_waits_passively_and_the_environment_is_restored() -> None:
    out = _child(PROGRAM)
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in out
    assert "environment: None" in out


def test_the_users_settings_win() -> None:
    out = _child(PROGRAM, OMP_WAIT_POLICY="active", OMP_NUM_THREADS="3")
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in out
    assert "threads used: 3" in out  # OpenMP's count, as the user set it


BUSY_PROGRAM = """
    import sys
    sys.path.insert(0, '.')
    from test_parallel_threads import _module, threads_with_every_core_busy
    print('threads used:', threads_with_every_core_busy(_module('p')))
"""


def test_with_openmps_dynamic_adjustment_the_users_count_is_the_most_a_loop_takes() -> None:
    assert "threads used: 2" in _child(BUSY_PROGRAM, OMP_NUM_THREADS="2")  # the user's count, cores busy or not
    assert "threads used: 1" in _child(BUSY_PROGRAM, OMP_NUM_THREADS="2", OMP_DYNAMIC="true")
