"""Theoretical occupancy: how many blocks of a kernel an SM holds at once, and so how many warps, given the
registers a thread, the threads a block and the shared memory a block, with each architecture's limits.

Each resource bounds the blocks an SM holds, and the least bound wins:
- registers: a warp is given its threads' registers rounded up to 256; each of the SM's 4 sub-partitions holds
  as many such warps as fit in its quarter of the register file (16K registers), and a block needs all its warps;
- shared memory: a block takes its static and dynamic shared memory plus the 1 KB the system reserves for each
  block (sm_80 and newer), rounded up to 128 bytes, out of the SM's shared memory (its largest carveout);
- threads: the SM's warp slots (2048 threads on sm_80 and sm_90, 1536 on sm_86 and sm_89), whole blocks only;
- blocks: the most resident blocks an SM schedules (32 on sm_80 and sm_90, 16 on sm_86, 24 on sm_89).
A block that needs more registers or shared memory than a block may have fits zero times.
"""

from __future__ import annotations

from dataclasses import dataclass

from hidet_lang.cuda_limits import MAX_THREADS_PER_BLOCK, arch_number, shared_memory_per_block

__all__ = ["Occupancy", "SmLimits", "max_threads_per_block", "occupancy", "sm_limits"]

WARP_SIZE = 32


@dataclass(frozen=True)
class SmLimits:
    """The resources of one SM of an architecture: `max_threads` and `max_blocks` resident, `shared_bytes` of
    shared memory (the largest carveout) and `shared_per_block` a block may have, `reserved_per_block` bytes the
    system keeps for each block, `shared_granularity` (the unit shared memory is allocated in), `registers` (32-bit,
    in `sub_partitions` equal parts), `register_granularity` (the unit, in registers, a warp's are allocated in),
    `max_registers_per_thread`."""

    max_threads: int
    max_blocks: int
    shared_bytes: int
    shared_per_block: int
    reserved_per_block: int
    shared_granularity: int = 128
    registers: int = 64 * 1024
    sub_partitions: int = 4
    register_granularity: int = 256
    max_registers_per_thread: int = 255

    @property
    def max_warps(self) -> int:
        """The warps an SM holds at most."""
        return self.max_threads // WARP_SIZE


_KB = 1024
# (threads, blocks, shared memory an SM has, the system's share of each block), by compute capability
_SM_LIMITS = {
    75: (1024, 16, 64 * _KB, 0),
    80: (2048, 32, 164 * _KB, _KB),
    86: (1536, 16, 100 * _KB, _KB),
    87: (2048, 16, 164 * _KB, _KB),
    89: (1536, 24, 100 * _KB, _KB),
    90: (2048, 32, 228 * _KB, _KB),
    100: (2048, 32, 228 * _KB, _KB),
    120: (1536, 32, 100 * _KB, _KB),
}


def sm_limits(arch: str) -> SmLimits:
    """The SM limits of normalized architecture `arch` ('sm_80', 'sm_90a', ...); for an architecture not in the
    table, those of the closest older one (ValueError for one older than sm_75)."""
    capability = arch_number(arch)
    known = [c for c in _SM_LIMITS if c <= capability]
    if not known:
        raise ValueError(f"no SM limits known for {arch!r}; the oldest architecture known is sm_75")
    threads, blocks, shared, reserved = _SM_LIMITS[max(known)]
    return SmLimits(max_threads=threads, max_blocks=blocks, shared_bytes=shared,
                    shared_per_block=shared_memory_per_block(arch), reserved_per_block=reserved)


@dataclass(frozen=True)
class Occupancy:
    """The blocks of a kernel an SM holds at once (`blocks_per_sm`), its `warps_per_sm` out of `max_warps`, and
    what limits them (`limited_by`: some of 'registers', 'shared memory', 'threads', 'blocks'; every resource whose
    bound is the least)."""

    blocks_per_sm: int
    warps_per_sm: int
    max_warps: int
    limited_by: tuple[str, ...]

    @property
    def fraction(self) -> float:
        """Resident warps over the most an SM holds."""
        return self.warps_per_sm / self.max_warps

    def __str__(self) -> str:
        return f"{self.fraction:.0%} ({self.blocks_per_sm} blocks, {self.warps_per_sm}/{self.max_warps} warps)"


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def _warps_by_registers(limits: SmLimits, registers: int) -> int:
    """The warps of threads with `registers` registers each that an SM's register file holds."""
    if registers > limits.max_registers_per_thread:
        return 0
    per_warp = _round_up(max(registers, 1) * WARP_SIZE, limits.register_granularity)
    return (limits.registers // limits.sub_partitions // per_warp) * limits.sub_partitions


def block_shared_bytes(limits: SmLimits, shared_bytes: int, reserved_included: bool = False) -> int:
    """The shared memory an SM gives a block that uses `shared_bytes` (static and dynamic): with the system's
    reserved share (unless `reserved_included`: the static size counts it already), rounded up to the unit."""
    reserved = 0 if reserved_included else limits.reserved_per_block
    return _round_up(shared_bytes + reserved, limits.shared_granularity)


def occupancy(arch: str, registers: int, threads_per_block: int, shared_bytes: int,
              reserved_included: bool = False) -> Occupancy:
    """The theoretical occupancy on `arch` of a kernel whose threads use `registers` registers each, launched with
    `threads_per_block` threads and `shared_bytes` of shared memory (static and dynamic) a block; see the module
    docstring. `reserved_included`: the static size already counts the system's reserved kilobyte (a cubin for
    sm_90 or newer, see `cubin_info`). ValueError for a block of no thread or more than 1024."""
    if not 1 <= threads_per_block <= MAX_THREADS_PER_BLOCK:
        raise ValueError(f"a block has 1 to {MAX_THREADS_PER_BLOCK} threads, not {threads_per_block}")
    limits = sm_limits(arch)
    warps = -(-threads_per_block // WARP_SIZE)
    smem = block_shared_bytes(limits, shared_bytes, reserved_included)
    own_smem = shared_bytes - (limits.reserved_per_block if reserved_included else 0)
    if own_smem > limits.shared_per_block:
        by_shared = 0
    else:
        by_shared = limits.shared_bytes // smem if smem else limits.max_blocks
    bounds = {
        "registers": _warps_by_registers(limits, registers) // warps,
        "shared memory": by_shared,
        "threads": limits.max_warps // warps,
        "blocks": limits.max_blocks,
    }
    blocks = min(bounds.values())
    limited_by = tuple(name for name, bound in bounds.items() if bound == blocks)
    return Occupancy(blocks_per_sm=blocks, warps_per_sm=blocks * warps, max_warps=limits.max_warps,
                     limited_by=limited_by)


def max_threads_per_block(arch: str, registers: int, launch_bound: int | None = None) -> int:
    """The most threads a block of a kernel using `registers` registers a thread may have on `arch`: 1024, its
    launch bound, and the whole warps the register file holds, whichever is least (0 beyond 255 registers)."""
    warps = _warps_by_registers(sm_limits(arch), registers)
    return min(MAX_THREADS_PER_BLOCK, launch_bound or MAX_THREADS_PER_BLOCK, warps * WARP_SIZE)
