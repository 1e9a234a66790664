"""Slack and a canary after every host array that `hidet.empty/zeros/ones/full/randn/rand` allocate.

A guarded array's memory is rounded up to a multiple of `SLACK_UNIT` bytes (as Hidet's allocator rounds its
blocks, so that a program that writes a little past the end of an array, such as Hidet's vector-addition tutorial
does, runs as it does in Hidet), and `CANARY` follows the slack. After each call of a compiled function from Python,
the canary of every guarded array passed to it is compared with the pattern; a kernel that wrote past the slack is
reported as `HeapOverrunError` naming the parameter, instead of corrupting the heap silently. Only the arrays of
the call are checked (an overrun of one runs into its own canary first), which costs about 0.2 us per array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SLACK_UNIT = 4096
"""A guarded array's data and slack take a multiple of this many bytes (one at least)."""

DATA_ALIGNMENT = 64
"""A guarded array's data starts at a multiple of this many bytes: a cache line, so that a kernel's 64-byte vector
loads and stores of it (an AVX-512 register) each touch one line, not two (numpy starts a large array 16 bytes past
a page boundary, which made a matmul's weight panels 15% slower to stream)."""

CANARY = bytes((37 * k + 0xA7) % 256 for k in range(256))
"""The bytes that follow the slack; a write past the slack changes them."""


class HeapOverrunError(RuntimeError):
    """A compiled function wrote past the end of a host array (beyond its slack)."""


class GuardedBuffer(np.ndarray):
    """The bytes of a guarded array: its data, its slack, then `CANARY` (the last bytes). Every view of the array
    has this buffer as its `base`, through which the canary is found."""

    def canary_intact(self) -> bool:
        """Whether the canary still holds its pattern."""
        return self.view(np.ndarray)[-len(CANARY):].tobytes() == CANARY  # a plain array slices faster


def guarded_empty(shape: tuple[int, ...], dtype: np.dtype, array_type: type[np.ndarray] = np.ndarray) -> np.ndarray:
    """An uninitialized C-contiguous array of `array_type`, `shape` and `dtype` in a guarded buffer (its `base`),
    its data starting at a multiple of `DATA_ALIGNMENT` bytes."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    rounded = max(SLACK_UNIT, -(-nbytes // SLACK_UNIT) * SLACK_UNIT)
    owner = np.empty(rounded + len(CANARY) + DATA_ALIGNMENT, np.uint8)
    start = -owner.ctypes.data % DATA_ALIGNMENT
    canary = owner[start + rounded:start + rounded + len(CANARY)]
    canary[:] = np.frombuffer(CANARY, np.uint8)
    raw = owner[start:start + rounded + len(CANARY)].view(GuardedBuffer)
    array = array_type(shape, dtype, buffer=raw)  # its base is `raw`, whose base is the plain array owning the bytes
    if hasattr(array, "__dict__"):  # a subclass's array keeps a view of its canary, checked without a search
        array.heap_canary = canary  # (of the owner, not of `raw`: no reference cycle)
    return array


def guard_of(value: Any) -> GuardedBuffer | None:
    """The guarded buffer holding `value`'s data, found through the bases of an array (a view's base is the array it
    views) or of the storage of a tensor of the operator library; None for memory that is not guarded."""
    base = getattr(value, "base", None)
    if base is None:
        base = getattr(getattr(value, "storage", None), "base", None)
    while base is not None:
        if type(base) is GuardedBuffer:
            return base
        base = getattr(base, "base", None)
    return None


def check_guards(func: str, arguments: tuple[tuple[str, Any], ...]) -> None:
    """Raise `HeapOverrunError` for the first (parameter name, value) of `arguments` whose guarded buffer's canary
    `func` overwrote; the canary is restored, so that the array can be used (and checked) again."""
    for param, value in arguments:
        canary = getattr(value, "heap_canary", None)
        if canary is not None and canary.tobytes() == CANARY:
            continue  # an array the allocation functions made, intact (about 0.2 us); views and tensors search
        guard = guard_of(value)
        if guard is not None and not guard.canary_intact():
            guard[-len(CANARY):] = np.frombuffer(CANARY, np.uint8)
            what = f" ({value.dtype} {list(value.shape)})" if hasattr(value, "shape") else ""
            raise HeapOverrunError(
                f"{func}(): wrote past the end of the array given for parameter '{param}'{what}, beyond the "
                f"{len(guard) - len(CANARY)} bytes its allocation was rounded up to: the memory after it may be "
                "corrupted; check the loop bounds against the parameter's shape")
