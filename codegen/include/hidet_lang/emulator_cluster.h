// hidet_lang CUDA emulator: thread block clusters (sm_90), with the GPU's semantics.
//
// A kernel launched with a cluster shape (cluster_dim) has its grid cut into clusters of that many blocks; the
// blocks of one cluster run together on one OS thread (emulator_launch.h: run_cluster), each with its own worker
// state, fibers, stacks and dynamic shared memory, their fibers interleaved: a fiber that waits hands over to the
// next runnable fiber of its block, and when none is left the scheduler resumes another block of the cluster. So
// a block may wait for another one (a cluster barrier, a remote mbarrier arrival, a multicast copy), which an
// ordinary launch, whose blocks run one after the other, cannot.
// - A block's rank in its cluster is x + y * cx + z * cx * cy of its index within the cluster (PTX
//   %cluster_ctarank); a launch without a cluster is one of clusters of one block.
// - cluster_map (PTX mapa) maps an address of the block's dynamic shared memory to the same offset in the block of
//   another rank. On the emulator a cluster kernel's shared memory is all dynamic (its static shared memory would be
//   the OS thread's, shared by the blocks; the build refuses it).
// - The cluster barrier (barrier.cluster.arrive / .wait): a phase completes when every thread of the cluster that
//   has not exited has arrived (an exited thread counts as arrived, as on the GPU); a wait returns once the phase
//   of the thread's last arrival has completed. Arriving twice without a wait, or waiting without an arrival,
//   fails the launch at the DSL line (checking mode) or the generated line.
// - Checking mode: a cluster kernel's blocks register their dynamic shared memory as they start (the entry's
//   first call), and a write into another block's shared memory marks its bytes written there, ordered before every
//   access (as a TMA load's are: the cluster's barriers order them); accesses of another block's shared memory are
//   not checked for races or uninitialized reads.
// - When no fiber of any block of the cluster can run and some have not finished, the launch fails with a
//   deadlock report naming, block by block, where each thread waits (a cluster barrier, an mbarrier, a
//   __syncthreads), instead of hanging.
// A part of cuda_emulator.h (after emulator_block.h; the checks and the mbarrier and TMA headers use shared_owner).
#pragma once
#ifndef HIDET_LANG_EMULATOR_CLUSTER_H
#define HIDET_LANG_EMULATOR_CLUSTER_H

namespace hl_emu {

static const uint8_t F_CLUSTER = 5;  // a fiber state: waiting at the cluster barrier (4 is the mbarrier's)

struct Cluster {
    int size;
    Block *blocks[HL_MAX_CLUSTER_SIZE];  // by rank
    uint32_t phase;    // the cluster barrier's current phase
    int waiting_for;   // threads that have neither arrived in it nor exited
    int exited;        // threads of the cluster that have exited
};

// The block whose dynamic shared memory holds `p`: the running block, or another block of its cluster.
static Block *shared_owner(const void *p) {
    Block *b = hdr()->st->block;
    Cluster *c = b->cluster;
    if (c)
        for (int r = 0; r < c->size; ++r) {
            const State *st = c->blocks[r]->st;
            if ((const char *)p >= st->dyn_smem && (const char *)p < st->dyn_smem + st->dyn_smem_bytes)
                return c->blocks[r];
        }
    return b;
}

[[noreturn]] static void cluster_fail(int line, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
[[noreturn]] static void cluster_fail(int line, const char *where, const char *fmt, ...) {
    Header *h = hdr();
    Block *b = h->st->block;
    char buf[1024], detail[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, h->linear);
    t.add(": %s, ", detail);
    if (where)
        t.add("at %s", where);
    else
        t.add("at generated line %d", line);
    record_error(b->launch, "%s", buf);
    abort_block(b);
}

static inline int cluster_size_of(const Block *b) { return b->cluster ? b->cluster->size : 1; }

static inline int cluster_rank() { return hdr()->st->block->rank; }

static inline int cluster_size() { return cluster_size_of(hdr()->st->block); }

// A block rank an operation names: within the cluster.
static inline void cluster_check_rank(int rank, int line, const char *where, const char *op) {
    int size = cluster_size();
    if (rank < 0 || rank >= size)
        cluster_fail(line, where, "%s names block rank %d, outside the cluster of %d block%s (ranks 0 to %d)", op,
                     rank, size, size == 1 ? "" : "s", size - 1);
}

// `p` (in the running block's dynamic shared memory) at the same offset in the block of rank `rank`.
static void *cluster_map(const void *p, int rank, int line, const char *where, const char *op) {
    cluster_check_rank(rank, line, where, op);
    const State *st = hdr()->st;
    if (!st->block->cluster) return (void *)p;  // a cluster of one block: the block itself
    size_t off = (size_t)((const char *)p - st->dyn_smem);
    if ((const char *)p < st->dyn_smem || off >= st->dyn_smem_bytes)
        cluster_fail(line, where, "%s: the address %p is not in the block's dynamic shared memory (%zu bytes at %p; "
                     "on the emulator a cluster kernel's shared memory is dynamic)", op, p, st->dyn_smem_bytes,
                     (const void *)st->dyn_smem);
    return st->block->cluster->blocks[rank]->st->dyn_smem + off;
}

// The threads of the cluster that are still to arrive in a phase.
static inline int cluster_expected(const Cluster *c) { return c->size * c->blocks[0]->n - c->exited; }

// Complete the barrier's phase once no thread is awaited: wake every thread of the cluster that waits at it. Like
// a __syncthreads, it orders the accesses of each block's threads before it before those after it (checking mode).
static void cluster_settle(Cluster *c) {
    if (c->waiting_for > 0) return;
    ++c->phase;
    c->waiting_for = cluster_expected(c);
    for (int r = 0; r < c->size; ++r) {
        Block *b = c->blocks[r];
        ++b->epoch;
        for (int i = 0; i < b->n; ++i)
            if (b->fib[i].state == F_CLUSTER) push_ready(b, i);
    }
}

static void cluster_arrive(int line, const char *where) {
    Header *h = hdr();
    Block *b = h->st->block;
    if (!b->cluster) return;  // a cluster of one block: the block's threads are all that arrive
    Fiber *me = &b->fib[h->linear];
    if (me->cluster_arrived)
        cluster_fail(line, where, "cluster_arrive twice without a cluster_wait in between");
    me->cluster_arrived = 1;
    me->cluster_phase = b->cluster->phase;
    --b->cluster->waiting_for;
    cluster_settle(b->cluster);
}

// A thread of a block in a cluster exited: it no longer holds up the cluster barrier.
static void cluster_thread_exited(Block *b, Fiber *f) {
    Cluster *c = b->cluster;
    ++c->exited;
    if (!f->cluster_arrived || f->cluster_phase != c->phase) --c->waiting_for;
    cluster_settle(c);
}

static void cluster_wait(int line, const char *where) {
    Header *h = hdr();
    Block *b = h->st->block;
    if (!b->cluster) {  // a cluster of one block: a barrier of the block's threads
        barrier(line, B_SYNC, 0);
        return;
    }
    Fiber *me = &b->fib[h->linear];
    if (!me->cluster_arrived) cluster_fail(line, where, "cluster_wait without a cluster_arrive before it");
    while (me->cluster_phase == b->cluster->phase) {
        me->state = F_CLUSTER;
        me->line = line;
        run_next(b, me);
    }
    me->cluster_arrived = 0;
}

// Describe where the threads of block `b` wait: runs of threads in the same state at the same line.
static void cluster_describe_block(Text &t, Block *b) {
    uint3 bi = b->st->block_idx;
    t.add("block (%u, %u, %u) (rank %d): ", bi.x, bi.y, bi.z, b->rank);
    int start = 0;
    for (int i = 1; i <= b->n; ++i) {
        const Fiber &s = b->fib[start];
        if (i < b->n && b->fib[i].state == s.state && b->fib[i].line == s.line &&
            (s.state != 4 /* F_MBARRIER */ || b->fib[i].mbar == s.mbar))
            continue;
        t.add(start ? "; threads %d-%d " : "threads %d-%d ", start, i - 1);
        switch (s.state) {
            case F_CLUSTER: t.add("wait at the cluster barrier (generated line %d)", s.line); break;
            case 4: t.add("wait on mbarrier %p (generated line %d)", s.mbar, s.line); break;
            case F_BARRIER: t.add("wait at %s (generated line %d)", barrier_name(s.op), s.line); break;
            case F_WARP: t.add("wait at %s (generated line %d)", warp_op_name(s.op), s.line); break;
            case F_DONE: t.add("have exited"); break;
            default: t.add("are runnable"); break;
        }
        start = i;
    }
}

// No fiber of the cluster can run and some have not finished: record a deadlock report of every block.
static void cluster_deadlock(Cluster *c) {
    char buf[4096];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, c->blocks[0]);
    t.add("deadlock: no thread of the cluster of %d blocks can proceed (the cluster barrier awaits %d thread%s): ",
          c->size, c->waiting_for, c->waiting_for == 1 ? "" : "s");
    for (int r = 0; r < c->size; ++r) {
        if (r) t.add(" | ");
        cluster_describe_block(t, c->blocks[r]);
    }
    record_error(c->blocks[0]->launch, "%s", buf);
}

}  // namespace hl_emu

#endif  // HIDET_LANG_EMULATOR_CLUSTER_H
