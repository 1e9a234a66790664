// hidet_lang CUDA emulator: thread block clusters (sm_90), with the GPU's semantics.
//
// A kernel launched with a cluster shape (cluster_dim) has its grid cut into clusters of that many blocks; the
// blocks of one cluster run together on one OS thread (emulator_runtime.cpp: run_cluster), each with its own worker
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

// Defined in emulator_runtime.cpp.
// The block whose dynamic shared memory holds `p`: the running block, or another block of its cluster.
Block *shared_owner(const void *p);
// Fail the launch at the DSL location `where` (or the generated line `line`), naming the thread.
[[noreturn]] void cluster_fail(int line, const char *where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// `p` (in the running block's dynamic shared memory) at the same offset in the block of rank `rank`.
void *cluster_map(const void *p, int rank, int line, const char *where, const char *op);
// The cluster barrier: barrier.cluster.arrive and .wait.
void cluster_arrive(int line, const char *where);
void cluster_wait(int line, const char *where);

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

// The threads of the cluster that are still to arrive in a phase.
static inline int cluster_expected(const Cluster *c) { return c->size * c->blocks[0]->n - c->exited; }

}  // namespace hl_emu

#endif  // HIDET_LANG_EMULATOR_CLUSTER_H
