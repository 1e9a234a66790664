"""Differential testing of generated programs: the CPU, the CUDA emulator and the IR interpreter must agree.

``run_batch(programs, inputs)`` puts the programs of ``hidet_lang.testing.programs`` into one CPU module and one
CUDA module (one compilation each), runs every program on the CPU (``public`` function, a loop over the
workers), on the CUDA emulator (one block, a thread per worker) and in ``hidet_lang.testing.interpret`` (the
parsed IR of the CPU module), and compares the outputs.

Agreement rule: every output bit for bit (integers, and floats with all NaNs counted equal). That holds because
the project's compiler flags give the DSL's semantics (``codegen.toolchain.compiler.SEMANTICS_FLAGS``: no fused
multiply-add contraction, wrapping signed integers; ``_Float16`` rounded after every operation) and the headers give
the rest (a float converted to an integer type saturates, NaN to 0: ``hidet_lang/float_to_int.h``). The one exception:
float outputs of a program that calls ``exp log sin cos tanh`` (``Program.uses_libm``) may differ by one ulp, since
the C compiler evaluates such a call on constants while compiling, correctly rounded, where the C library (and so
the interpreter, through Python's ``math``) may be an ulp off.
"""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from hidet_lang.testing.interpret import run_function
from hidet_lang.testing.programs import N_INPUTS, N_OUT, Program, load_module, module_source

__all__ = ["TARGETS", "Outcome", "draw_examples", "program_inputs", "run_batch", "same_outputs"]

TARGETS = ("cpu", "emulator", "interpreter")

_SPECIAL_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -2.5, 1e-3, 1e30, -1e30, 65504.0, 7e4, math.inf, -math.inf,
                   math.nan, 1e-310, 2.0 ** -24, 3e9, -3e9, 2.0 ** 63, 128.5, -129.0]


def program_inputs() -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    """Inputs of a generated program: ``xi`` (i64: zero, small and extreme values) and ``xf`` (f64: values of f32 and of
    full f64 precision, signed zeros, infinities, NaN, subnormals, values just past an integer type's range)."""
    ints = st.one_of(st.just(0), st.integers(-9, 9), st.integers(-(2 ** 63), 2 ** 63 - 1),
                     st.sampled_from([127, -128, 255, 32767, -32768, 65535, 2 ** 31 - 1, -(2 ** 31), 2 ** 32 - 1]))
    floats = st.one_of(st.floats(-100, 100, width=32), st.floats(-100, 100), st.sampled_from(_SPECIAL_FLOATS))
    return st.tuples(st.lists(ints, min_size=N_INPUTS, max_size=N_INPUTS).map(lambda v: np.array(v, np.int64)),
                     st.lists(floats, min_size=N_INPUTS, max_size=N_INPUTS).map(lambda v: np.array(v, np.float64)))


def draw_examples(strategy: st.SearchStrategy[Any], count: int, random_seed: int) -> list[Any]:
    """``count`` values drawn from ``strategy`` by hypothesis's generator, reproducibly from ``random_seed``
    (for batches outside ``@given``: a batch is compiled as one module)."""
    drawn: list[Any] = []

    @seed(random_seed)
    @settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value: Any) -> None:
        drawn.append(value)

    collect()
    return drawn[:count]


@dataclass
class Outcome:
    """What each target gave for one program: ``(oi, of)`` arrays, or the text of the exception it raised."""

    program: Program
    inputs: tuple[np.ndarray, np.ndarray]
    results: dict[str, tuple[np.ndarray, np.ndarray] | str]

    def disagreeing(self) -> list[str]:
        """The targets whose result differs from the interpreter's (all of them if the interpreter failed)."""
        ref = self.results["interpreter"]
        ulps = 1 if self.program.uses_libm else 0
        return [t for t in TARGETS[:2] if not same_outputs(self.results[t], ref, ulps)]


def same_outputs(a: tuple[np.ndarray, np.ndarray] | str, b: tuple[np.ndarray, np.ndarray] | str,
                 float_ulps: int = 0) -> bool:
    """The agreement rule: equal integers, floats equal bit for bit, or within `float_ulps` units in the last
    place (every NaN equal to every NaN; values of different signs never within)."""
    if isinstance(a, str) or isinstance(b, str):
        return False
    if not np.array_equal(a[0], b[0]):
        return False
    fa, fb = a[1], b[1]
    nan = np.isnan(fa) & np.isnan(fb)
    same_sign = np.signbit(fa) == np.signbit(fb)
    with np.errstate(over="ignore"):  # adjacent doubles of one sign differ by 1 as integers
        distance = np.abs(fa.view(np.int64) - fb.view(np.int64))
    return bool(np.all(nan | (same_sign & (distance >= 0) & (distance <= float_ulps))))


def _run(fn: Any, program: Program, inputs: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | str:
    xi, xf = (x.copy() for x in inputs)
    oi, of = np.zeros(program.workers * N_OUT, np.int64), np.zeros(program.workers * N_OUT, np.float64)
    try:
        fn(xi, xf, oi, of)
    except Exception:  # noqa: BLE001 - a target's failure is a result to compare
        return traceback.format_exc(limit=3)
    return oi, of


def run_batch(programs: list[Program], inputs: list[tuple[np.ndarray, np.ndarray]],
              directory: str | None = None) -> list[Outcome]:
    """Build ``programs`` as one CPU and one CUDA module, run each on its inputs on every target and return the
    outcomes. A module that fails to build fails every program of its target."""
    outcomes = [Outcome(p, x, {}) for p, x in zip(programs, inputs)]
    cpu_module = load_module(module_source(programs, "cpu"), directory)
    for target in ("cpu", "emulator"):
        try:
            script = cpu_module if target == "cpu" else load_module(module_source(programs, "cuda"), directory)
            built = script.build()
        except Exception:  # noqa: BLE001
            error = traceback.format_exc(limit=3)
            for o in outcomes:
                o.results[target] = error
            continue
        for i, o in enumerate(outcomes):
            o.results[target] = _run(built[f"p{i}"], o.program, o.inputs)
    ir = cpu_module.ir_module()
    for i, o in enumerate(outcomes):
        o.results["interpreter"] = _run(lambda *a, name=f"p{i}": run_function(ir, name, *a), o.program, o.inputs)
    return outcomes
