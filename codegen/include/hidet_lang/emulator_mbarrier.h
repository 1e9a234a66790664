// hidet_lang CUDA emulator: mbarriers, the shared-memory barriers of asynchronous copies (PTX mbarrier.*).
//
// An mbarrier is 8 bytes of shared memory. The emulator keeps its whole state in them, as the GPU does:
//   bits 0-19 the arrivals still pending in the current phase, 20-39 the expected arrival count (init's),
//   40-60 the pending transaction bytes (signed: a copy may complete its bytes before they are expected),
//   61 the current phase's parity, 62-63 the tag 0b01 of an initialized barrier (0 and the checking mode's 0xff
//   fill of a fresh shared array are not initialized).
// The current phase completes when no arrival and no transaction byte is pending: its parity flips, the pending
// arrivals are reset to the expected count, and every thread waiting on the barrier becomes runnable.
// A wait on the parity of the current phase blocks the thread (a fiber) until that phase completes; when no other
// thread of the block can run (or the kernel runs without fibers), nothing can complete the phase: the launch
// fails with a deadlock report naming each thread's wait instead of hanging. In a cluster another block may
// complete it (a remote arrival, a multicast copy): there the cluster's scheduler reports the deadlock of them all
// (emulator_cluster.h), and a completed phase wakes the waiting threads of the block that holds the barrier. try_wait waits the same way (the GPU
// may return false after a time limit, the emulator only when the phase cannot complete, which it reports).
// Misuse (a barrier used before init, a count outside [1, 2^20), more arrivals than expected, transaction counts
// beyond the hardware's range, more transaction bytes completed than expected when the phase's last arrival comes)
// fails the launch, naming the DSL line in checking mode (`where`) and the generated line otherwise.
// A part of the primitives header's emulator branch (after cuda_emulator.h); its out-of-line parts are in
// emulator_runtime.cpp.
#pragma once
#ifndef HIDET_LANG_EMULATOR_MBARRIER_H
#define HIDET_LANG_EMULATOR_MBARRIER_H

#pragma GCC visibility push(hidden)  // the runtime's, as in cuda_emulator.h
namespace hl_emu {

static const uint8_t F_MBARRIER = 4;  // a fiber state beside emulator_block.h's: waiting on an mbarrier's phase
static const uint64_t MBAR_FIELD = (1ull << 20) - 1;
static const long long MBAR_TX_LIMIT = (1ll << 20) - 1;  // the transaction count's range on the GPU
static const uint64_t MBAR_TAG = 1ull << 62;

struct MBarrier {
    unsigned pending, expected;
    long long tx;
    unsigned phase;
};

static inline bool mbar_initialized(uint64_t word) { return (word >> 62) == 1; }

static inline MBarrier mbar_decode(uint64_t word) {
    long long tx = (long long)((word >> 40) & ((1ull << 21) - 1));
    if (tx >= (1ll << 20)) tx -= 1ll << 21;
    return MBarrier{(unsigned)(word & MBAR_FIELD), (unsigned)((word >> 20) & MBAR_FIELD), tx,
                    (unsigned)((word >> 61) & 1)};
}

static inline uint64_t mbar_encode(const MBarrier &m) {
    return MBAR_TAG | ((uint64_t)m.phase << 61) | (((uint64_t)m.tx & ((1ull << 21) - 1)) << 40) |
           ((uint64_t)m.expected << 20) | m.pending;
}

// Defined in emulator_runtime.cpp.
// Fail the launch at the DSL location `where` (or the generated line `line`), naming the thread and the barrier.
[[noreturn]] void mbar_fail(int line, const char *where, const void *bar, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
// Complete the current phase when nothing is pending; wake the fibers waiting on the barrier (of the block whose
// shared memory holds it: another block of the cluster for a remote arrival or a multicast copy).
void mbar_settle(void *bar, MBarrier m);
// Whether the phase of parity `parity` has completed: at once if the current phase's parity differs; otherwise
// the thread waits until it completes (a deadlock report when it never can).
int mbar_wait(void *bar, int parity, int line, const char *where);

static inline MBarrier mbar_load(const void *bar, int line, const char *where, const char *op) {
    uint64_t word;
    memcpy(&word, bar, 8);
    if (!mbar_initialized(word))
        mbar_fail(line, where, bar, "%s on a barrier that was never initialized (mbarrier_init first)", op);
    return mbar_decode(word);
}

static inline void mbar_store(void *bar, const MBarrier &m) {
    uint64_t word = mbar_encode(m);
    memcpy(bar, &word, 8);
}

static inline void mbar_check_tx(const MBarrier &m, int line, const char *where, const void *bar) {
    if (m.tx > MBAR_TX_LIMIT || m.tx < -MBAR_TX_LIMIT)
        mbar_fail(line, where, bar, "%lld transaction bytes pending, beyond the mbarrier's range of +-%lld", m.tx,
                  MBAR_TX_LIMIT);
}

static inline void mbar_init(void *bar, int count, int line, const char *where) {
    if (((uintptr_t)bar & 7) != 0) mbar_fail(line, where, bar, "an mbarrier must be 8-byte aligned");
    if (count < 1 || (uint64_t)count > MBAR_FIELD)
        mbar_fail(line, where, bar, "mbarrier_init's count %d is outside [1, %llu]", count,
                  (unsigned long long)MBAR_FIELD);
    mbar_store(bar, MBarrier{(unsigned)count, (unsigned)count, 0, 0});
}

// One arrival, after adding `expect_tx` transaction bytes; the barrier's state before it (the token).
static inline uint64_t mbar_arrive(void *bar, int expect_tx, int line, const char *where) {
    MBarrier m = mbar_load(bar, line, where, "an arrival");
    uint64_t token;
    memcpy(&token, bar, 8);
    if (m.pending == 0)
        mbar_fail(line, where, bar, "an arrival beyond the %u expected in the phase", m.expected);
    m.tx += expect_tx;
    mbar_check_tx(m, line, where, bar);
    if (--m.pending == 0 && m.tx < 0)
        mbar_fail(line, where, bar, "the phase's last arrival finds %lld more transaction bytes completed than "
                  "expected (mbarrier_arrive_expect_tx / mbarrier_expect_tx give too few)", -m.tx);
    mbar_settle(bar, m);
    return token;
}

static inline void mbar_expect_tx(void *bar, int bytes, int line, const char *where) {
    MBarrier m = mbar_load(bar, line, where, "expect_tx");
    m.tx += bytes;
    mbar_check_tx(m, line, where, bar);
    mbar_store(bar, m);
}

// An asynchronous copy completed `bytes` transaction bytes on the barrier.
static inline void mbar_complete_tx(void *bar, long long bytes, int line, const char *where) {
    MBarrier m = mbar_load(bar, line, where, "a copy's complete_tx");
    m.tx -= bytes;
    mbar_check_tx(m, line, where, bar);
    if (m.pending == 0 && m.tx < 0)
        mbar_fail(line, where, bar, "a copy completes %lld transaction bytes more than the phase expects", -m.tx);
    mbar_settle(bar, m);
}

}  // namespace hl_emu
#pragma GCC visibility pop

#endif  // HIDET_LANG_EMULATOR_MBARRIER_H
