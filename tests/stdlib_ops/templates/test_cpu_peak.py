"""`cpu_peak.machine_peak`: the measured FMA rate and copy bandwidth are plausible against the arithmetic of the
machine (never compared with a timing of their own, which a busy machine would make fail at random), the FMA loop's
and the bfloat16 dot product loop's assembly hold nothing but their chains, the dot product is taken for bfloat16
matmuls only where it outruns the FMAs, and a machine with no vector FMA gets no arithmetic peak."""

from __future__ import annotations

import math
import platform
import re
import subprocess

import pytest

from codegen.toolchain.compiler import DEFAULT_C_FLAGS, find_c_compiler, workaround_flags
from codegen.toolchain.headers import INCLUDE_DIR
from stdlib_ops.templates import cpu_peak
from stdlib_ops.templates.cpu_lanes import machine_has_bf16_dot, machine_lanes
from stdlib_ops.templates.cpu_peak import CHAINS, FMA_PIPES, machine_peak, nominal_gflops

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


def loop_assembly(source: str, function_name: str, instruction: str) -> str:
    """The assembly of the loop of `function_name` in the C `source` that issues `instruction` (the only such
    loop), compiled with the flags of a module's library."""
    compiler = find_c_compiler()
    command = (*compiler.command, "-fPIC", *DEFAULT_C_FLAGS, *workaround_flags(compiler), f"-I{INCLUDE_DIR}", "-x", "c",
               "-S", "-o", "-", "-")
    assembly = subprocess.run(command, input=source, capture_output=True, text=True, check=True).stdout
    function = assembly[assembly.index(f"{function_name}:"):]
    function = function[:function.index(".cfi_endproc")]
    # the loop: the block that jumps back to its own label and holds the instruction
    blocks = re.findall(r"^(\.L\w+):\n(.*?)^\s+j\w+\s+\1$", function, re.MULTILINE | re.DOTALL)
    loops = [body for _, body in blocks if instruction in body]
    assert len(loops) == 1, function
    return loops[0]


def assert_only_chains_in_registers(loop: str, instruction: str, chains: int) -> None:
    """`loop` is `chains` (or a multiple) of `instruction` on registers, and its count, test and jump."""
    instructions = [line.split()[0] for line in loop.splitlines() if line.strip() and ":" not in line
                    and not line.strip().startswith(".")]
    steps = sum(i.startswith(instruction) for i in instructions)
    assert steps and steps % chains == 0, loop  # each chain's step (unrolled or not)
    assert "(" not in loop, loop  # no load, store or spill: the accumulators stay in registers
    assert len(instructions) - steps <= 4, loop  # and no copies: the loop's count, its test and its jump


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86 assembly")
def test_the_fma_loop_holds_only_the_multiply_adds_in_registers() -> None:
    lanes = machine_lanes()
    if lanes is None:
        pytest.skip("the machine's C compiler enables no vector FMA")
    loop = loop_assembly(cpu_peak.chains_module(1, lanes, "fma").source(), "chains_of_steps", "vfmadd")
    assert_only_chains_in_registers(loop, "vfmadd", CHAINS[lanes])


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86 assembly")
def test_the_bf16_dot_loop_holds_only_the_dot_products_in_registers_and_is_measured() -> None:
    if not machine_has_bf16_dot():
        pytest.skip("the machine's C compiler does not enable AVX512-BF16")
    loop = loop_assembly(cpu_peak.chains_module(1, 16, "dot_bf16").source(), "chains_of_steps", "vdpbf16ps")
    assert_only_chains_in_registers(loop, "vdpbf16ps", CHAINS[16])
    rate = cpu_peak.dot_bf16_gflops(1)  # which checks every chain's values
    assert 0 < rate <= FASTEST_CLOCK_GHZ * 16 * 4 * FMA_PIPES


def test_the_bf16_dot_pays_only_where_the_machine_has_it_and_it_outruns_the_fmas(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_peak, "machine_has_bf16_dot", lambda: False)
    assert not cpu_peak.bf16_dot_pays()  # not measured at all
    monkeypatch.setattr(cpu_peak, "machine_has_bf16_dot", lambda: True)
    monkeypatch.setattr(cpu_peak, "fma_gflops", lambda threads, lanes: 100.0)
    for rate, pays in ((200.0, True), (125.0, True), (120.0, False), (50.0, False)):
        monkeypatch.setattr(cpu_peak, "dot_bf16_gflops", lambda threads, rate=rate: rate)
        assert cpu_peak.bf16_dot_pays() == pays


def test_a_machine_without_vector_fma_has_no_arithmetic_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_peak, "machine_lanes", lambda: None)
    peak = machine_peak(1)
    assert peak.gflops is None and peak.gbs > 0 and nominal_gflops(1) is None
    assert "unknown" in str(peak)
