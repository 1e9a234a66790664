"""mbarriers: the shared-memory barriers that asynchronous copies (TMA) complete and threads wait on (PTX
`mbarrier.*`, sm_90 here: the transaction counts need Hopper).

An mbarrier is one `u64` of shared memory (`bars = shared_tensor(u64, [stages])`; pass `~bars[i]`, or a tensor for
its first element). `mbarrier_init(bar, count)` (one thread, then `fence_mbarrier_init()` and a `syncthreads()`
before others use it) starts phase 0 expecting `count` arrivals. A phase completes when all its arrivals have come
and all the transaction bytes expected of it (`mbarrier_arrive_expect_tx`, `mbarrier_expect_tx`) have been
completed by copies (`tma_load`); the next phase then starts with the same count. Waits name a phase by its
parity: `mbarrier_wait(bar, parity)` returns once the phase of that parity has completed, which is at once for a
phase before the current one (so the first wait of a producer on an "empty" barrier, with parity 1, passes).

On the emulator a waiting thread yields to the others; a wait that no thread can ever satisfy fails the launch with
a deadlock report, and misuse (a barrier used before init, more arrivals than its count, more bytes completed than
expected) fails it at the DSL line in checking mode (`build(check=True)`).
"""

from __future__ import annotations

from typing import Any

from hidet_lang.frontend import semantics
from hidet_lang.frontend.builtins import _pointer_to
from hidet_lang.ir import expr as E
from hidet_lang.ir.intrinsics import intrinsic
from hidet_lang.ir.types import PointerType, int32, uint64


def _barrier(bar: Any, what: str) -> E.Expr:
    """`bar` (a pointer to u64, or a u64 tensor for its first element) as the barrier's address."""
    e = _pointer_to(bar, what)
    t = e.type
    assert isinstance(t, PointerType)
    if t.is_void or t.dtype != uint64:
        raise TypeError(f"{what} needs the address of a u64 mbarrier in shared memory (e.g. ~bars[i] with "
                        f"bars = shared_tensor(u64, [n])), got {semantics.describe(e)}")
    return e


def mbarrier_init(bar: Any, count: Any) -> E.Intrinsic:
    """Initialize the mbarrier at `bar` to expect `count` (1 to 2^20 - 1) arrivals a phase, in phase 0."""
    return intrinsic("mbarrier_init", _barrier(bar, "mbarrier_init"), semantics.cast(count, int32))


def mbarrier_arrive(bar: Any) -> E.Intrinsic:
    """Arrive on the mbarrier once; the barrier's state before the arrival (a u64 token)."""
    return intrinsic("mbarrier_arrive", _barrier(bar, "mbarrier_arrive"))


def mbarrier_arrive_expect_tx(bar: Any, nbytes: Any) -> E.Intrinsic:
    """Expect `nbytes` more transaction bytes in the current phase, then arrive once (the token, as
    `mbarrier_arrive`). The thread that issues a phase's TMA loads calls it with their bytes."""
    return intrinsic("mbarrier_arrive_expect_tx", _barrier(bar, "mbarrier_arrive_expect_tx"),
                     semantics.cast(nbytes, int32))


def mbarrier_expect_tx(bar: Any, nbytes: Any) -> E.Intrinsic:
    """Expect `nbytes` more transaction bytes in the current phase, without arriving."""
    return intrinsic("mbarrier_expect_tx", _barrier(bar, "mbarrier_expect_tx"), semantics.cast(nbytes, int32))


def mbarrier_try_wait(bar: Any, parity: Any) -> E.Intrinsic:
    """Nonzero once the phase of parity `parity` (0 or 1) has completed; the GPU may give 0 after a time limit
    (wait in a loop), the emulator waits for the phase."""
    return intrinsic("mbarrier_try_wait_parity", _barrier(bar, "mbarrier_try_wait"), semantics.cast(parity, int32))


def mbarrier_wait(bar: Any, parity: Any) -> E.Intrinsic:
    """Wait until the phase of parity `parity` (0 or 1) has completed: a `try_wait` loop on the GPU. The data its
    transactions copied (TMA loads) is then visible to the thread."""
    return intrinsic("mbarrier_wait_parity", _barrier(bar, "mbarrier_wait"), semantics.cast(parity, int32))


def fence_mbarrier_init() -> E.Intrinsic:
    """Make this thread's `mbarrier_init`s visible to the asynchronous proxy and the cluster (PTX
    `fence.mbarrier_init.release.cluster`); follow it with a `syncthreads()`."""
    return intrinsic("fence_mbarrier_init")


__all__ = ["fence_mbarrier_init", "mbarrier_arrive", "mbarrier_arrive_expect_tx", "mbarrier_expect_tx",
           "mbarrier_init", "mbarrier_try_wait", "mbarrier_wait"]
