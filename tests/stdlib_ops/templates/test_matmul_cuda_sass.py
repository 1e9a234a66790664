"""The machine code NVRTC makes of the CUDA-core matmul template (sm_80 and sm_90), read with `cuobjdump -sass`:
the register tile stays in registers (no local-memory loads or stores), a step of k is unrolled into
`thread_m * thread_n * block_k` fused multiply-adds fed by 16-byte shared reads, and the copies are 16-byte
`LDGSTS` where a row's length may be a multiple of 4 (none where the sizes known at build time say it is not),
and two blocks of 256 threads fit the registers of an SM."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from codegen.toolchain.sass import find_tool
from stdlib_ops.templates.kernels.matmul_cuda import matmul_cuda

CUOBJDUMP = find_tool("cuobjdump")
pytestmark = pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump is not installed (pip package "
                                "nvidia-cuda-cuobjdump): the machine code cannot be read")


@cache
def opcodes(arch: str, sizes: tuple[int | str, ...], **params: int) -> Counter[str]:
    """How many of each SASS instruction (with its modifiers, `LDS.128`) the template's cubin for `arch` has."""
    cubin = matmul_cuda(*sizes, **params).build(target=f"cuda:{arch}").cubin
    path = Path(f"/tmp/hl_matmul_{arch}_{abs(hash((sizes, tuple(params.items()))))}.cubin")
    path.write_bytes(cubin)
    try:
        sass = subprocess.run([CUOBJDUMP, "-sass", str(path)], check=True, capture_output=True, text=True).stdout
    finally:
        path.unlink()
    found = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass)
    assert found, "no instruction found in the SASS"
    return Counter(found)


def count(ops: Counter[str], prefix: str) -> int:
    """The instructions whose opcode is `prefix` or starts with `prefix.`."""
    return sum(n for op, n in ops.items() if op == prefix or op.startswith(prefix + "."))


SYMBOLIC = ("batch", "m", "n", "k")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_register_tile_stays_in_registers(arch: str) -> None:
    ops = opcodes(arch, SYMBOLIC)
    assert count(ops, "LDL") == 0 and count(ops, "STL") == 0, ops
    assert count(ops, "FFMA") == 8 * 8 * 8  # thread_m * thread_n * block_k, one step of k unrolled
    # per 4 steps of k: 8 rows of a and 4 x 2 groups of b, 16-byte reads each; twice per step of 8
    assert ops["LDS.128"] == 2 * (8 + 4 * 2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_rows_whose_length_may_be_a_multiple_of_4_are_copied_16_bytes_at_a_time(arch: str) -> None:
    ops = opcodes(arch, SYMBOLIC)
    assert ops["LDGSTS.E.BYPASS.128"] >= 2, ops  # a chunk of a and one of b, a thread
    aligned = opcodes(arch, (2, 256, 96, 64))  # k and n multiples of 4, known at build time
    assert aligned["LDGSTS.E.BYPASS.128"] >= 2 and count(aligned, "LDL") == 0


def test_sizes_known_not_to_allow_16_byte_copies_use_element_reads() -> None:
    ops = opcodes("sm_90", (1, 33, 7, 257))
    assert count(ops, "LDGSTS") == 0 and count(ops, "LDG") > 0
    assert count(ops, "LDL") == 0 and count(ops, "STL") == 0


def test_a_smaller_tile_unrolls_its_own_step() -> None:
    ops = opcodes("sm_90", SYMBOLIC, block_m=64, block_n=64, thread_m=4, thread_n=4, block_k=16, stages=3)
    assert count(ops, "LDL") == 0 and count(ops, "STL") == 0
    assert count(ops, "FFMA") == 4 * 4 * 16


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_two_blocks_of_256_threads_fit_an_sm(arch: str) -> None:
    cubin = matmul_cuda(*SYMBOLIC).build(target=f"cuda:{arch}").cubin
    path = Path(f"/tmp/hl_matmul_resources_{arch}.cubin")
    path.write_bytes(cubin)
    try:
        usage = subprocess.run([CUOBJDUMP, "-res-usage", str(path)], check=True, capture_output=True, text=True).stdout
    finally:
        path.unlink()
    registers = [int(r) for r in re.findall(r"REG:(\d+)", usage)]
    assert registers and max(registers) <= 128  # 65536 registers an SM: two blocks of 256 threads
    assert "LOCAL:0" in usage
