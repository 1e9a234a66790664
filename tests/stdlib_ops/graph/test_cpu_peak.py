"""`cpu_peak.machine_peak`: the measured FMA rate and copy bandwidth are plausible against the arithmetic of the
machine (never compared with a timing of their own, which a busy machine would make fail at random), the FMA loop's
assembly holds nothing but the multiply-adds, and a machine with no vector FMA gets no arithmetic peak."""

from __future__ import annotations

import math
import platform
import re
import subprocess

import pytest

from codegen.toolchain.compiler import DEFAULT_C_FLAGS, find_c_compiler, workaround_flags
from codegen.toolchain.headers import INCLUDE_DIR
from stdlib_ops.graph import cpu_peak
from stdlib_ops.graph.cpu_peak import CHAINS, FMA_PIPES, machine_peak, nominal_gflops
from stdlib_ops.templates.cpu_lanes import machine_lanes

FASTEST_CLOCK_GHZ = 8.0
"""Faster than any core runs: a measured rate above this clock's is miscounted, or a loop the compiler shortened."""


def test_the_measured_peak_is_plausible_against_the_machine_arithmetic() -> None:
    lanes = machine_lanes()
    if lanes is None:
        pytest.skip("the machine's C compiler enables no vector FMA")
    peak = machine_peak(2)
    assert peak.threads == 2 and peak.gflops is not None and math.isfinite(peak.gflops)
    assert 0 < peak.gflops <= 2 * FASTEST_CLOCK_GHZ * lanes * 2 * FMA_PIPES
    nominal = nominal_gflops(2)
    if nominal is not None:
        # the cores may run above or below the nominal clock, and some have one FMA pipe, not two; a core shared
        # with another process halves it again
        assert nominal / 4 <= peak.gflops <= 2 * nominal
    assert 0 < peak.gbs < math.inf
    assert str(peak).startswith(f"peak on 2 threads: {peak.gflops:.0f} GFLOP/s")


def test_the_peak_is_measured_once_a_process_and_thread_count() -> None:
    one, again = machine_peak(1), machine_peak(1)
    assert one == again and one.threads == 1 and one.gbs > 0


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86 assembly")
def test_the_fma_loop_holds_only_the_multiply_adds_in_registers() -> None:
    lanes = machine_lanes()
    if lanes is None:
        pytest.skip("the machine's C compiler enables no vector FMA")
    compiler = find_c_compiler()
    command = (*compiler.command, "-fPIC", *DEFAULT_C_FLAGS, *workaround_flags(compiler), f"-I{INCLUDE_DIR}", "-x", "c",
               "-S", "-o", "-", "-")  # the flags of the module's library, to assembly
    source = cpu_peak.fma_module(1, lanes).source()
    assembly = subprocess.run(command, input=source, capture_output=True, text=True, check=True).stdout
    function = assembly[assembly.index("fma_chains:"):]
    function = function[:function.index(".cfi_endproc")]
    # the loop: the block that jumps back to its own label and multiplies-adds
    blocks = re.findall(r"^(\.L\w+):\n(.*?)^\s+j\w+\s+\1$", function, re.MULTILINE | re.DOTALL)
    loops = [body for _, body in blocks if "vfmadd" in body]
    assert len(loops) == 1, function
    instructions = [line.split()[0] for line in loops[0].splitlines() if line.strip() and ":" not in line
                    and not line.strip().startswith(".")]
    fmas = sum(i.startswith("vfmadd") for i in instructions)
    assert fmas and fmas % CHAINS[lanes] == 0, loops[0]  # each chain's multiply-add a step (unrolled or not)
    assert "(" not in loops[0], loops[0]  # no load, store or spill: the accumulators stay in registers
    assert len(instructions) - fmas <= 4, loops[0]  # and no copies: the loop's count, its test and its jump


def test_a_machine_without_vector_fma_has_no_arithmetic_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_peak, "machine_lanes", lambda: None)
    peak = machine_peak(1)
    assert peak.gflops is None and peak.gbs > 0 and nominal_gflops(1) is None
    assert "unknown" in str(peak)
