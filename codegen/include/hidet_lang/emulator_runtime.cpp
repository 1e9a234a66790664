// hidet_lang CUDA emulator: the runtime's out-of-line code (launches, workers and their stacks, running a block's
// threads, barriers, warp-collective operations, clusters, reports and deadlock detection, checked accesses,
// mbarriers and TMA copies, the stack-overflow fault handler, and the entry points of emulator_launch.h).
//
// Compiled once per compiler and flags (those of the emulator's libraries, plus -fvisibility=hidden) into a
// position-independent object kept in the compilation cache (codegen/toolchain/emulator_runtime.py), and linked
// into every emulator library: a module's translation unit holds its kernels, its host code and the headers' inline
// parts (thread indices, the fast path's block loop, the checked-access helpers' fast checks, the warp operations'
// wrappers), and calls the declarations the headers give for the rest. Linked statically, every module keeps its
// own copy of the runtime's state (its workers, the first failed assertion's line, the error text, its link in the
// fault-handler chain), as when each module compiled the runtime itself; every symbol but the `protected` entry
// points is hidden, so two loaded modules never bind to each other's runtime.
#include "cuda_emulator.h"
#include "emulator_mbarrier.h"
#include "emulator_tma.h"

namespace hl_emu {

#if !HL_EMU_FIBER_ASM
thread_local Ctx *t_starting;
#endif

static long g_held_maps = 0;  // the memory maps the stacks of this module's workers take (see map_regions)

// An OS thread's worker for this module (created by its first launch, freed at the thread's exit or by a release:
// see "A module's workers" below) and the alternate signal stack the thread runs the fault handler on, when this
// module installed it (see "Stack overflows"; it stays as long as the thread, across releases).
struct WorkerHolder {
    Worker *w = nullptr;
    char *alt_stack = nullptr;
    WorkerHolder *prev = nullptr, *next = nullptr;  // the module's registry of holders with a worker
    ~WorkerHolder();
};

static thread_local WorkerHolder t_worker;
static thread_local char t_error[4096];
static int g_assert_line = 0;

static void cluster_thread_exited(Block *b, Fiber *f);  // below, with the clusters
static void guard_thread(WorkerHolder *h);              // below, "Stack overflows"
static void unguard_thread(WorkerHolder *h);
static Worker *thread_worker(Launch *L);                // below, "A module's workers"
static int release_workers();
static void cluster_deadlock(Cluster *c);

// ---- Blocks: reports, running a block's threads, barriers, assertions (emulator_block.h) ------------------

// Unmap the worker's stacks (the next launch maps them again).
static void unmap_regions(Worker *w) {
    if (w->map) munmap(w->map, w->map_bytes);
    __atomic_sub_fetch(&g_held_maps, w->map_count, __ATOMIC_RELAXED);
    w->map = nullptr;
    w->map_count = 0;
    w->regions = nullptr;
    w->nregions = 0;
    w->header_dims = uint3{0, 0, 0};
}

static void worker_free(Worker *w) {
    if (!w) return;
    for (Worker *peer : w->peers) worker_free(peer);
    free(w->cluster);
    free(w->block.wgmma);
#ifdef HL_EMU_PROFILE
    profile_free(&w->block);
#endif
    unmap_regions(w);
    for (int i = 0; i < MAX_SHARED_ARRAYS; ++i) free(w->block.shared[i].shadow);
    free(w->dsmem);
    free(w);
}

// Record the launch's first failure (later ones are dropped) and stop starting blocks.
void record_error(Launch *L, const char *fmt, ...) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&L->failed, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(L->msg, sizeof L->msg, fmt, ap);
        va_end(ap);
    }
    __atomic_store_n(&L->stop, 1, __ATOMIC_RELEASE);
}

static const char *barrier_name(int kind) {
    switch (kind) {
        case B_COUNT: return "__syncthreads_count";
        case B_AND: return "__syncthreads_and";
        case B_OR: return "__syncthreads_or";
        default: return "__syncthreads";
    }
}

static const char *warp_op_name(int op) {
    switch (op) {
        case W_IDX: return "hl_shfl_sync";
        case W_UP: return "hl_shfl_up_sync";
        case W_DOWN: return "hl_shfl_down_sync";
        case W_XOR: return "hl_shfl_xor_sync";
        case W_BALLOT: return "hl_ballot_sync";
        case W_ANY: return "hl_any_sync";
        case W_ALL: return "hl_all_sync";
        case W_MMA_M16N8K16: return "hl_mma_m16n8k16_f16_f32";
        case W_LDMATRIX_X4: return "hl_ldmatrix_x4";
        case W_MMA_M16N8K16_BF16: return "hl_mma_m16n8k16_bf16_f32";
        case W_LDMATRIX_X4_TRANS: return "hl_ldmatrix_x4_trans";
        case W_MMA_M16N8K8_TF32: return "hl_mma_m16n8k8_tf32_f32";
        default: return "hl_syncwarp";
    }
}

void where_prefix(Text &t, Block *b) {
    uint3 bi = b->st->block_idx;
    t.add("CUDA emulator: kernel '%s', block (%u, %u, %u): ", b->launch->name, bi.x, bi.y, bi.z);
}

void describe_thread(Text &t, Block *b, int i) {
    uint3 d = b->st->block_dim;
    if (d.y == 1 && d.z == 1)
        t.add("thread %d", i);
    else
        t.add("thread %d = threadIdx (%u, %u, %u)", i, (unsigned)i % d.x, (unsigned)i / d.x % d.y,
              (unsigned)i / (d.x * d.y));
}

static inline bool same_wait(const Fiber &f, int state, int op, int line, unsigned mask) {
    if (f.state != state) return false;
    if (state != F_BARRIER && state != F_WARP) return true;
    return f.op == op && f.line == line && (state != F_WARP || f.mask == mask);
}

// List which threads of the block wait where: "threads 0-15 wait at __syncthreads (generated line 12); ...".
static void describe_states(Text &t, Block *b) {
    const int max_groups = 12;
    int g_state[max_groups], g_op[max_groups], g_line[max_groups];
    unsigned g_mask[max_groups];
    int ngroups = 0;
    bool truncated = false;
    for (int i = 0; i < b->n; ++i) {
        const Fiber &f = b->fib[i];
        int g = 0;
        while (g < ngroups && !same_wait(f, g_state[g], g_op[g], g_line[g], g_mask[g])) ++g;
        if (g < ngroups) continue;
        if (ngroups == max_groups) {
            truncated = true;
            continue;
        }
        g_state[g] = f.state, g_op[g] = f.op, g_line[g] = f.line, g_mask[g] = f.mask;
        ++ngroups;
    }
    for (int g = 0; g < ngroups; ++g) {
        t.add(g ? "; threads " : "threads ");
        int ranges = 0, start = -1;
        for (int i = 0; i <= b->n; ++i) {
            bool in = i < b->n && same_wait(b->fib[i], g_state[g], g_op[g], g_line[g], g_mask[g]);
            if (in && start < 0) start = i;
            if (!in && start >= 0) {
                if (ranges < 16) {
                    const char *sep = ranges ? ", " : "";
                    if (start == i - 1)
                        t.add("%s%d", sep, start);
                    else
                        t.add("%s%d-%d", sep, start, i - 1);
                } else if (ranges == 16) {
                    t.add(", ...");
                }
                ++ranges;
                start = -1;
            }
        }
        switch (g_state[g]) {
            case F_BARRIER: t.add(" wait at %s (generated line %d)", barrier_name(g_op[g]), g_line[g]); break;
            case F_WARP:
                t.add(" wait at %s with mask 0x%08x (generated line %d)", warp_op_name(g_op[g]), g_mask[g], g_line[g]);
                break;
            case F_DONE: t.add(" have exited"); break;
            case F_MBARRIER: t.add(" wait on an mbarrier (generated line %d)", g_line[g]); break;
            case F_WGMMA: t.add(" wait for their warpgroup's wgmma (generated line %d)", g_line[g]); break;
            default: t.add(" are runnable"); break;
        }
    }
    if (truncated) t.add("; (more groups omitted)");
    uint3 d = b->st->block_dim;
    if (d.y != 1 || d.z != 1)
        t.add(" (threads numbered threadIdx.x + threadIdx.y * %u + threadIdx.z * %u)", d.x, d.x * d.y);
}

// End the running block after a failure: back to the worker; the block's fibers are never resumed.
[[noreturn]] void abort_block(Block *b) {
    b->failed = 1;
    ctx_swap(b->fibers ? &b->fib[hdr()->linear].ctx : &b->plain, &b->main);
    __builtin_trap();
}

// A barrier or warp operation must wait, but the kernel was launched without fibers.
[[noreturn]] static void fail_no_fibers(Block *b, const char *what, int line) {
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, hdr()->linear);
    t.add(" executed %s (generated line %d), which waits for other threads, but the kernel was launched with "
          "needs_fibers=0 (no barrier or warp-collective operation expected)",
          what, line);
    record_error(b->launch, "%s", buf);
    abort_block(b);
}

// Record the block's failure `title`, with where each of its threads waits.
static void record_states(Block *b, const char *title) {
    char buf[4096];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    t.add("%s: ", title);
    describe_states(t, b);
    record_error(b->launch, "%s", buf);
}

[[noreturn]] static void fail_with_states(Block *b, const char *title) {
    record_states(b, title);
    abort_block(b);
}

static void fiber_main(void *arg) {
    Block *b = (Block *)arg;
    b->entry(b->args);
    Fiber *f = &b->fib[hdr()->linear];
    f->state = F_DONE;
    ++b->done;
    if (b->cluster) cluster_thread_exited(b, f);
    run_next(b, f);
    __builtin_trap();  // a finished fiber is never resumed
}

// Runs every thread of a block without fibers, one after the other, on stack region 0.
static void plain_main(void *arg) {
    Block *b = (Block *)arg;
    Header *h = hdr();
    uint3 d = b->st->block_dim;
    void (*entry)(void **) = b->entry;
    void **args = b->args;
    int i = 0;
    for (unsigned z = 0; z < d.z; ++z)
        for (unsigned y = 0; y < d.y; ++y)
            for (unsigned x = 0; x < d.x; ++x) {
                h->thread_idx = uint3{x, y, z};
                h->linear = i++;
                entry(args);
            }
    ctx_swap(&b->plain, &b->main);
    __builtin_trap();  // never resumed
}

int barrier(int line, int kind, int pred) {
    Header *h = hdr();
    Block *b = h->st->block;
    int n = b->n;
    if (n == 1) return pred != 0;  // count, and, or of one thread
    if (!b->fibers) fail_no_fibers(b, barrier_name(kind), line);
    if (b->bar_count == 0) {
        b->bar_line = line;
        b->bar_kind = kind;
        b->bar_mixed = 0;
        b->bar_acc = 0;
    } else if (b->bar_line != line || b->bar_kind != kind) {
        b->bar_mixed = 1;
    }
    b->bar_acc += pred != 0;
    Fiber *me = &b->fib[h->linear];
    me->line = line;
    me->op = (uint8_t)kind;
    if (++b->bar_count < n) {
        me->state = F_BARRIER;
        run_next(b, me);
        return b->bar_result;
    }
    if (b->bar_mixed) {
        me->state = F_BARRIER;
        fail_with_states(b, "barrier divergence: the threads of the block reached different barriers");
    }
    int acc = b->bar_acc;
    b->bar_result = kind == B_COUNT ? acc : kind == B_AND ? (acc == n) : (acc != 0);
    b->bar_count = 0;
    ++b->epoch;
#ifdef HL_EMU_PROFILE
    profile_flush(b);  // every request before the barrier is complete
#endif
    Fiber *fib = b->fib;
    for (int i = 0; i < n; ++i)
        if (fib[i].state == F_BARRIER) push_ready(b, i);
    return b->bar_result;
}

// A device assertion failed: record its line (the first one) and start no more blocks.
void assert_fail(int line) {
    int expected = 0;
    __atomic_compare_exchange_n(&g_assert_line, &expected, line, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    Launch *L = hdr()->st->block->launch;
    __atomic_store_n(&L->asserted, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&L->stop, 1, __ATOMIC_RELEASE);
}

// ---- Warp-collective operations (emulator_warp.h) ---------------------------------------------------------

// D = A (16x16, row) @ B (16x8, col) + C, f16 (or, with `bf16`, bf16) inputs, f32 accumulation. Products of
// halves (and of bf16s) are exact in f32; each D element is C plus the 16 products added in k order in f32 (the
// GPU's order and intermediate precision are not specified by PTX: results can differ from the GPU's in the last
// bits).
static void mma_m16n8k16_all(Warp *w, bool bf16) {
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; ++l) {
        const MmaLane *p = (const MmaLane *)(uintptr_t)w->val[l];
        int g = l >> 2, t = l & 3;
        for (int r = 0; r < 4; ++r) {
            int row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
            A[row][col] = half_lo(p->a[r], bf16);
            A[row][col + 1] = half_hi(p->a[r], bf16);
        }
        for (int r = 0; r < 2; ++r) {
            B[2 * t + 8 * r][g] = half_lo(p->b[r], bf16);
            B[2 * t + 8 * r + 1][g] = half_hi(p->b[r], bf16);
        }
        for (int r = 0; r < 4; ++r) C[g + 8 * (r >> 1)][2 * t + (r & 1)] = p->c[r];
    }
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 8; ++j) {
            float acc = C[i][j];
            for (int k = 0; k < 16; ++k) acc += A[i][k] * B[k][j];
            C[i][j] = acc;
        }
    for (int l = 0; l < 32; ++l) {
        const MmaLane *p = (const MmaLane *)(uintptr_t)w->val[l];
        int g = l >> 2, t = l & 3;
        for (int r = 0; r < 4; ++r) p->c[r] = C[g + 8 * (r >> 1)][2 * t + (r & 1)];
    }
}

// D = A (16x8, row) @ B (8x8, col) + C with tf32 inputs (each register's upper 19 bits) and f32 accumulation; the
// products of tf32s are exact in f32, each D element is C plus the 8 products added in k order in f32.
static void mma_m16n8k8_tf32_all(Warp *w) {
    float A[16][8], B[8][8], C[16][8];
    for (int l = 0; l < 32; ++l) {
        const MmaLane *p = (const MmaLane *)(uintptr_t)w->val[l];
        int g = l >> 2, t = l & 3;
        for (int r = 0; r < 4; ++r) A[g + 8 * (r & 1)][t + 4 * (r >> 1)] = tf32_truncated(p->a[r]);
        for (int r = 0; r < 2; ++r) B[t + 4 * r][g] = tf32_truncated(p->b[r]);
        for (int r = 0; r < 4; ++r) C[g + 8 * (r >> 1)][2 * t + (r & 1)] = p->c[r];
    }
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 8; ++j) {
            float acc = C[i][j];
            for (int k = 0; k < 8; ++k) acc += A[i][k] * B[k][j];
            C[i][j] = acc;
        }
    for (int l = 0; l < 32; ++l) {
        const MmaLane *p = (const MmaLane *)(uintptr_t)w->val[l];
        int g = l >> 2, t = l & 3;
        for (int r = 0; r < 4; ++r) p->c[r] = C[g + 8 * (r >> 1)][2 * t + (r & 1)];
    }
}

// ldmatrix x4; with `trans`, each matrix transposed: register i of lane l then holds elements g of rows 2t and
// 2t + 1 of matrix i (in bits 0-15 and 16-31).
static void ldmatrix_x4_all(Warp *w, bool trans) {
    uint32_t out[32][4];  // every lane's rows are read before any lane's registers are written
    for (int l = 0; l < 32; ++l) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 4; ++i) {
            if (trans) {
                uint16_t lo, hi;
                memcpy(&lo, ((const LdmatrixLane *)(uintptr_t)w->val[8 * i + 2 * t])->row + 2 * g, 2);
                memcpy(&hi, ((const LdmatrixLane *)(uintptr_t)w->val[8 * i + 2 * t + 1])->row + 2 * g, 2);
                out[l][i] = (uint32_t)lo | (uint32_t)hi << 16;
                continue;
            }
            const LdmatrixLane *src = (const LdmatrixLane *)(uintptr_t)w->val[8 * i + g];
            memcpy(&out[l][i], src->row + 4 * t, 4);
        }
    }
    for (int l = 0; l < 32; ++l) memcpy(((const LdmatrixLane *)(uintptr_t)w->val[l])->dst, out[l], 16);
}

// One lane's part of a warp-collective operation: publish (v, param, width), wait until every lane named in
// `mask` (that exists) has arrived, and return this lane's result. The last lane to arrive computes all results.
uint64_t warp_collective(int line, int op, unsigned mask, uint64_t v, int param, int width) {
    Header *h = hdr();
    Block *b = h->st->block;
    int me = h->linear;
    int lane = me & 31;
    Warp *w = &b->warps[me >> 5];
    uint32_t bit = 1u << lane;
    Fiber *f = &b->fib[me];
    if (!(mask & bit)) {
        char buf[1024];
        Text t{buf, sizeof buf, 0};
        where_prefix(t, b);
        describe_thread(t, b, me);
        t.add(" (lane %d) executed %s with mask 0x%08x, which does not name its own lane (generated line %d)", lane,
              warp_op_name(op), mask, line);
        record_error(b->launch, "%s", buf);
        abort_block(b);
    }
    uint32_t eff = mask & w->exist;
    w->val[lane] = v;
    w->param[lane] = param;
    w->width[lane] = width;
    w->mask[lane] = mask;
    w->line[lane] = line;
    w->op[lane] = (uint8_t)op;
    uint32_t arrived = w->arrived | bit;
    f->line = line;
    f->op = (uint8_t)op;
    f->mask = mask;
    if ((arrived & eff) != eff) {
        w->arrived = arrived;
        if (!b->fibers) fail_no_fibers(b, warp_op_name(op), line);
        f->state = F_WARP;
        run_next(b, f);
        return w->res[lane];
    }
    for (uint32_t m = eff; m; m &= m - 1) {
        int l = __builtin_ctz(m);
        if (w->op[l] != op || w->mask[l] != mask || (op != W_SYNCWARP && w->line[l] != line)) {
            f->state = F_WARP;
            w->arrived = arrived;
            fail_with_states(b, "warp divergence: lanes of a warp met at different warp-collective operations "
                                "or with different masks");
        }
    }
    w->arrived = arrived & ~eff;
    switch (op) {
        case W_IDX:
        case W_UP:
        case W_DOWN:
        case W_XOR:
            for (uint32_t m = eff; m; m &= m - 1) {
                int l = __builtin_ctz(m);
                int j = shfl_source(op, l, w->param[l], w->width[l]);
                w->res[l] = (eff >> j) & 1u ? w->val[j] : w->val[l];  // a lane not taking part: undefined
            }
            break;
        case W_BALLOT:
        case W_ANY:
        case W_ALL: {
            uint32_t bits = 0;
            for (uint32_t m = eff; m; m &= m - 1) {
                int l = __builtin_ctz(m);
                if (w->val[l]) bits |= 1u << l;
            }
            uint64_t r = op == W_BALLOT ? bits : op == W_ANY ? (bits != 0) : (bits == eff);
            for (uint32_t m = eff; m; m &= m - 1) w->res[__builtin_ctz(m)] = r;
            break;
        }
        case W_MMA_M16N8K16: mma_m16n8k16_all(w, false); break;
        case W_LDMATRIX_X4: ldmatrix_x4_all(w, false); break;
        case W_MMA_M16N8K16_BF16: mma_m16n8k16_all(w, true); break;
        case W_LDMATRIX_X4_TRANS: ldmatrix_x4_all(w, true); break;
        case W_MMA_M16N8K8_TF32: mma_m16n8k8_tf32_all(w); break;
        default: ++w->syncs; break;
    }
    int base = me & ~31;
    for (uint32_t m = eff & ~bit; m; m &= m - 1) push_ready(b, base + __builtin_ctz(m));
    return w->res[lane];
}

// The tensor-core operations need all 32 lanes of a full warp (the .aligned PTX instructions' requirement).
void require_full_warp(int line, int op) {
    Header *h = hdr();
    Block *b = h->st->block;
    int me = h->linear;
    if (b->warps[me >> 5].exist == 0xffffffffu) return;
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, me);
    t.add(" executed %s (generated line %d) in a partial warp: it is warp-collective and needs all 32 lanes of "
          "the warp (make the block size a multiple of 32)",
          warp_op_name(op), line);
    record_error(b->launch, "%s", buf);
    abort_block(b);
}

// ---- Thread block clusters (emulator_cluster.h) -----------------------------------------------------------

// The block whose dynamic shared memory holds `p`: the running block, or another block of its cluster.
Block *shared_owner(const void *p) {
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

[[noreturn]] void cluster_fail(int line, const char *where, const char *fmt, ...) {
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

// `p` (in the running block's dynamic shared memory) at the same offset in the block of rank `rank`.
void *cluster_map(const void *p, int rank, int line, const char *where, const char *op) {
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

void cluster_arrive(int line, const char *where) {
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

void cluster_wait(int line, const char *where) {
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
            case F_WGMMA: t.add("wait for their warpgroup's wgmma (generated line %d)", s.line); break;
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

// ---- Guarded and checked accesses (emulator_checks.h) -----------------------------------------------------

static void record_access_error(Block *b, int thread, int flags, const char *name, long long index,
                                long long extent, const char *where) {
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, thread);
    const char *what = flags & ACCESS_WRITE ? "writes" : flags & ACCESS_READ ? "reads" : "takes the address of";
    t.add(": out-of-bounds access: %s %s[%lld], which has %lld elements, at %s", what, name, index, extent, where);
    record_error(b->launch, "%s", buf);
}

[[noreturn]] void fail_access(int flags, const char *name, long long index, long long extent,
                                     const char *where) {
    Header *h = hdr();
    Block *b = h->st->block;
    record_access_error(b, h->linear, flags, name, index, extent, where);
    abort_block(b);
}

// An access through a view (`name`) of the tensor `origin_name` (`bytes` bytes) fell outside it, at byte `offset`.
static void record_view_error(Block *b, int thread, int flags, const char *name, long long index,
                              const char *origin_name, long long offset, long long bytes, const char *where) {
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, thread);
    const char *what = flags & ACCESS_WRITE ? "writes" : flags & ACCESS_READ ? "reads" : "takes the address of";
    t.add(": out-of-bounds access: %s %s[%lld], %lld bytes from the start of '%s', which has %lld bytes, at %s", what,
          name, index, offset, origin_name, bytes, where);
    record_error(b->launch, "%s", buf);
}

[[noreturn]] void fail_view_access(int flags, const char *name, long long index, const char *origin_name,
                                          long long offset, long long bytes, const char *where) {
    Header *h = hdr();
    Block *b = h->st->block;
    record_view_error(b, h->linear, flags, name, index, origin_name, offset, bytes, where);
    abort_block(b);
}

// After a fast block with failed store guards: report the lowest thread's; `sites` holds (name, where, origin)
// triples (origin: null but for a store through a view).
__attribute__((noinline, cold)) void fast_store_failed(FastBlock fb, const char *const *sites) {
    Block *b = hdr()->st->block;
    int first = -1;
    for (int i = 0; i < b->n; ++i) {
        if (fb.fail_site[i] && first < 0) {
            const char *const *site = sites + 3 * (fb.fail_site[i] - 1);
            if (site[2])
                record_view_error(b, i, ACCESS_WRITE, site[0], fb.fail_index[i], site[2], fb.fail_extent[i],
                                  fb.fail_bytes[i], site[1]);
            else
                record_access_error(b, i, ACCESS_WRITE, site[0], fb.fail_index[i], fb.fail_extent[i], site[1]);
            first = i;
        }
        fb.fail_site[i] = 0;
    }
}

SharedArray *find_shared(Block *b, const char *p) {
    for (int i = 0; i < b->nshared; ++i) {
        SharedArray *a = &b->shared[i];
        if (a->serial == b->serial && p >= a->base && p < a->base + a->bytes) return a;
    }
    return nullptr;
}

void shared_declared(const void *array, size_t bytes, const char *name, const char *where, bool fill) {
    Block *b = hdr()->st->block;
    const char *base = (const char *)array;
    SharedArray *a = nullptr;
    for (int i = 0; i < b->nshared; ++i)
        if (b->shared[i].base == base) a = &b->shared[i];
    if (a && a->serial == b->serial && a->bytes == bytes) return;  // registered in this block already
    if (!a) {
        if (b->nshared == MAX_SHARED_ARRAYS) return;  // not checked
        a = &b->shared[b->nshared++];
        a->base = base;
    }
    if (a->shadow_cap < bytes) {
        free(a->shadow);
        a->shadow = (Shadow *)malloc(bytes * sizeof(Shadow));
        a->shadow_cap = a->shadow ? bytes : 0;
        if (!a->shadow) {
            a->serial = 0;
            return;
        }
    }
    a->bytes = bytes;
    a->name = name;
    a->where = where;
    a->serial = b->serial;
    if (fill) memset((void *)base, 0xff, bytes);  // garbage, as a GPU's shared memory holds before its writes
    memset(a->shadow, 0, bytes * sizeof(Shadow));
}

// `op`: the instruction of a bulk access (cp.async, ldmatrix), or null for an element access `a[index]`.
[[noreturn]] static void fail_shared(Block *b, int me, const char *what, SharedArray *a, long long index,
                                     const char *where, const char *other, int other_thread, const char *op) {
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, me);
    if (op)
        t.add(": %s %s %s (shared, declared at %s)", op, what, a->name, a->where);
    else
        t.add(": %s %s[%lld] (shared, declared at %s)", what, a->name, index, a->where);
    if (other) {
        t.add(", %s ", other);
        describe_thread(t, b, other_thread);
        t.add(" since the last barrier: a race");
    } else {
        t.add(", which no thread of the block has written: uninitialized shared memory");
        if (!b->fibers && b->n > 1) t.add(" (or a race: no barrier orders another thread's write before this read)");
    }
    t.add(", at %s", where);
    record_error(b->launch, "%s", buf);
    abort_block(b);
}

void shared_access(const char *p, size_t size, int flags, long long index, const char *where, const char *op) {
    Header *h = hdr();
    Block *b = h->st->block;
    SharedArray *a = find_shared(b, p);
    if (!a && b->cluster && (flags & ACCESS_WRITE)) {  // another block's (emulator_cluster.h): marked written there
        Block *owner = shared_owner(p);
        SharedArray *o = owner == b ? nullptr : find_shared(owner, p);
        for (size_t k = 0; o && k < size && p + k < o->base + o->bytes; ++k) {
            Shadow &x = o->shadow[(size_t)(p - o->base) + k];
            x.written = 1, x.write_epoch = 0, x.readers = 0;  // epoch 0: ordered before every access
        }
        return;
    }
    if (!a || !(flags & (ACCESS_READ | ACCESS_WRITE))) return;
    int me = h->linear;
    size_t off = (size_t)(p - a->base);
    if (off + size > a->bytes) size = a->bytes - off;
    uint32_t e = b->epoch, syncs = b->warps[me >> 5].syncs;
    Shadow *s = &a->shadow[off];
    // an access of another thread is ordered before this one by a barrier, or by a __syncwarp of our warp
    auto ordered = [&](int other, uint32_t epoch, uint32_t other_syncs) {
        return other == me || epoch != e || ((other >> 5) == (me >> 5) && other_syncs != syncs);
    };
    if (flags & ACCESS_READ) {
        for (size_t k = 0; k < size; ++k) {
            if (!s[k].written) fail_shared(b, me, "reads", a, index, where, nullptr, 0, op);
            if (!ordered(s[k].writer, s[k].write_epoch, s[k].write_syncs))
                fail_shared(b, me, "reads", a, index, where, "written by", s[k].writer, op);
        }
        for (size_t k = 0; k < size; ++k) {
            Shadow &x = s[k];
            if (x.read_epoch != e || x.readers == 0) {
                x.readers = 1, x.reader = (uint16_t)me, x.mixed = 0;
            } else if (x.reader != me) {
                x.mixed |= (x.reader >> 5) != (me >> 5);
                x.readers = 2, x.other_reader = x.reader, x.reader = (uint16_t)me;
            }
            x.read_epoch = e;
            x.read_syncs = syncs;
        }
    }
    if (flags & ACCESS_WRITE) {
        for (size_t k = 0; k < size; ++k) {
            const Shadow &x = s[k];
            if (!ordered(x.writer, x.write_epoch, x.write_syncs))
                fail_shared(b, me, "writes", a, index, where, "also written by", x.writer, op);
            bool reads_ordered = x.read_epoch != e || (x.readers == 1 && x.reader == me) ||
                                 (!x.mixed && (x.reader >> 5) == (me >> 5) && x.read_syncs != syncs);
            if (!reads_ordered)
                fail_shared(b, me, "writes", a, index, where, "read by", x.reader != me ? x.reader : x.other_reader,
                            op);
        }
        for (size_t k = 0; k < size; ++k) {
            Shadow &x = s[k];
            x.write_epoch = e, x.write_syncs = syncs, x.writer = (uint16_t)me, x.written = 1;
            if (!(flags & ACCESS_READ)) x.readers = 0;
        }
    }
}

// ---- mbarriers (emulator_mbarrier.h) ----------------------------------------------------------------------

// Where a misuse happened: the DSL line in checking mode, else the generated line.
static void mbar_place(Text &t, int line, const char *where) {
    if (where)
        t.add("at %s", where);
    else
        t.add("at generated line %d", line);
}

[[noreturn]] void mbar_fail(int line, const char *where, const void *bar, const char *fmt, ...) {
    Header *h = hdr();
    Block *b = h->st->block;
    char buf[1024], detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, h->linear);
    t.add(": mbarrier %p: %s, ", bar, detail);
    mbar_place(t, line, where);
    record_error(b->launch, "%s", buf);
    abort_block(b);
}

// Complete the current phase when nothing is pending; wake the fibers waiting on the barrier (of the block whose
// shared memory holds it: another block of the cluster for a remote arrival or a multicast copy).
void mbar_settle(void *bar, MBarrier m) {
    if (m.pending == 0 && m.tx == 0) {
        m.phase ^= 1u;
        m.pending = m.expected;
        Block *b = shared_owner(bar);
        if (b->fibers)
            for (int i = 0; i < b->n; ++i)
                if (b->fib[i].state == F_MBARRIER && b->fib[i].mbar == bar) push_ready(b, i);
    }
    mbar_store(bar, m);
}

// Describe each thread's wait for a deadlock report: runs of threads in the same state at the same line.
static void mbar_describe_waits(Text &t, Block *b) {
    int start = 0;
    for (int i = 1; i <= b->n; ++i) {
        const Fiber &s = b->fib[start];
        if (i < b->n && b->fib[i].state == s.state && b->fib[i].line == s.line &&
            (s.state != F_MBARRIER || b->fib[i].mbar == s.mbar))
            continue;
        t.add(start ? "; threads %d-%d " : "threads %d-%d ", start, i - 1);
        switch (s.state) {
            case F_MBARRIER: t.add("wait on mbarrier %p (generated line %d)", s.mbar, s.line); break;
            case F_BARRIER: t.add("wait at a __syncthreads (generated line %d)", s.line); break;
            case F_WARP: t.add("wait at a warp-collective operation (generated line %d)", s.line); break;
            case F_DONE: t.add("have exited"); break;
            case F_WGMMA: t.add("wait for their warpgroup's wgmma (generated line %d)", s.line); break;
            default: t.add("are runnable"); break;
        }
        start = i;
    }
}

// Whether the phase of parity `parity` has completed: at once if the current phase's parity differs; otherwise
// the thread waits until it completes (a deadlock report when it never can).
int mbar_wait(void *bar, int parity, int line, const char *where) {
    Header *h = hdr();
    Block *b = h->st->block;
    for (;;) {
        MBarrier m = mbar_load(bar, line, where, "a wait");
        if (m.phase != ((unsigned)parity & 1u)) return 1;
        Fiber *me = b->fibers ? &b->fib[h->linear] : nullptr;
        // in a cluster, another block may complete the phase: its scheduler reports a deadlock of them all
        if (!me || (b->qhead == b->qtail && !b->cluster)) {
            char buf[4096];
            Text t{buf, sizeof buf, 0};
            where_prefix(t, b);
            t.add("deadlock: ");
            describe_thread(t, b, h->linear);
            t.add(" waits on mbarrier %p for the phase of parity %d to complete (%u of %u arrivals and %lld "
                  "transaction bytes pending), ", bar, parity & 1, m.pending, m.expected, m.tx);
            mbar_place(t, line, where);
            t.add(", and no other thread of the block can run to complete it");
            if (me) {
                me->state = F_MBARRIER, me->line = line;
                me->mbar = bar;
                t.add(": ");
                mbar_describe_waits(t, b);
            }
            record_error(b->launch, "%s", buf);
            abort_block(b);
        }
        me->state = F_MBARRIER;
        me->line = line;
        me->mbar = bar;
        run_next(b, me);
    }
}

// ---- The tensor memory accelerator (emulator_tma.h) -------------------------------------------------------

[[noreturn]] void tma_fail(int line, const char *where, const char *fmt, ...) {
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
    mbar_place(t, line, where);
    record_error(b->launch, "%s", buf);
    abort_block(b);
}

static const hl_tensor_map *tma_map(const void *map, int rank, const void *smem, int line, const char *where,
                                    const char *op) {
    const hl_tensor_map *m = (const hl_tensor_map *)map;
    if (m->magic != HL_TENSOR_MAP_MAGIC) tma_fail(line, where, "%s: the operand is not a tensor map", op);
    if (m->rank != rank)
        tma_fail(line, where, "%s takes %d coordinates, and the tensor map has rank %d", op, rank, m->rank);
    unsigned align = tma_alignment(m->swizzle);
    if ((uintptr_t)smem % align != 0)
        tma_fail(line, where, "%s: the shared-memory address %p is not %u-byte aligned (the hardware requires it%s)",
                 op, smem, align, m->swizzle == 128 ? " for the 128-byte swizzle" : "");
    return m;
}

void tma_load(void *dst, const void *map, void *bar, int rank, const int *coords, int line,
                     const char *where) {
    const hl_tensor_map *m = tma_map(map, rank, dst, line, where, "tma_load");
    uintptr_t base = (uintptr_t)dst;
    int e = m->elem_bytes, swizzle = m->swizzle;
    SharedArray *checked = nullptr;
    if (where) {  // checking mode: the dynamic shared memory is tracked from its first access, a copy's included
        State *st = hdr()->st;
        Block *owner = shared_owner(dst);
        const char *p = (const char *)dst;
        if (owner == st->block && p >= st->dyn_smem && p < st->dyn_smem + st->dyn_smem_bytes)
            shared_declared(st->dyn_smem, st->dyn_smem_bytes, "dynamic_shared_memory", where, false);
        checked = find_shared(owner, (const char *)dst);
    }
    tma_for_box(m, coords, [&](size_t off, const char *g) {
        char *d = (char *)tma_swizzle(base + off, swizzle);
        if (g)
            memcpy(d, g, (size_t)e);
        else
            memset(d, 0, (size_t)e);
        tma_mark_written(checked, d, (size_t)e);
    });
    mbar_complete_tx(bar, tma_box_bytes(m), line, where);
}

// A multicast load: the box to the same shared offset of every block of the cluster that `mask` (bits 0-15:
// ranks) names, completing its bytes on each one's mbarrier at `bar`'s offset.
void tma_load_multicast(void *dst, const void *map, void *bar, int mask, int rank, const int *coords,
                               int line, const char *where) {
    int size = cluster_size();
    unsigned inside = (1u << size) - 1u;
    if ((unsigned)mask & ~inside)
        tma_fail(line, where, "tma_load_multicast: the mask 0x%x names block ranks outside the cluster of %d "
                 "block%s (ranks 0 to %d)", (unsigned)mask, size, size == 1 ? "" : "s", size - 1);
    if (mask == 0) tma_fail(line, where, "tma_load_multicast: the mask names no block");
    for (int r = 0; r < size; ++r)
        if ((unsigned)mask >> r & 1u)
            tma_load(cluster_map(dst, r, line, where, "tma_load_multicast"), map,
                     cluster_map(bar, r, line, where, "tma_load_multicast"), rank, coords, line, where);
}

void tma_store(const void *map, const void *src, int rank, const int *coords, int line, const char *where) {
    const hl_tensor_map *m = tma_map(map, rank, src, line, where, "tma_store");
    uintptr_t base = (uintptr_t)src;
    int e = m->elem_bytes, swizzle = m->swizzle;
    tma_for_box(m, coords, [&](size_t off, const char *g) {
        if (g) memcpy((char *)g, (const char *)tma_swizzle(base + off, swizzle), (size_t)e);
    });
}

// ---- Stack overflows are launch errors --------------------------------------------------------------------
// Every kernel thread runs on the top `stack_bytes` of a STACK_REGION-aligned region whose rest below is PROT_NONE
// (see map_regions), so a thread that overflows its stack faults in that guard. A SIGSEGV/SIGBUS handler, run on
// an alternate signal stack of the worker's thread, recognises a fault inside a guard of the faulting worker's own
// regions, records the error (the kernel, block, thread, the stack's size and HIDET_LANG_EMU_STACK_KB) and switches
// back to the worker's context, as abort_block does: the launch fails like any other and the process lives on.
// Any other fault goes to the handler that was installed before (Python's faulthandler, or the default: the
// process dies as it would have). Each module (a shared library with its own copy of this runtime) chains its
// handler in front of the previous one, once, when its first worker starts; the code generator compiles kernels with
// -fstack-clash-protection so that a large frame touches the guard instead of jumping over it.

static const size_t ALT_STACK_BYTES = 64 * 1024;
static struct sigaction g_previous_segv, g_previous_bus;

// Hand a fault that is not a stack overflow of ours to the handler installed before.
static void chain_fault(int sig, siginfo_t *info, void *context) {
    const struct sigaction *previous = sig == SIGBUS ? &g_previous_bus : &g_previous_segv;
    if (previous->sa_flags & SA_SIGINFO) {
        previous->sa_sigaction(sig, info, context);
    } else if (previous->sa_handler != SIG_DFL && previous->sa_handler != SIG_IGN) {
        previous->sa_handler(sig);
    } else {
        sigaction(sig, previous, nullptr);  // returning re-executes the access, which now ends the process
    }
}

static void on_fault(int sig, siginfo_t *info, void *context) {
    Worker *w = t_worker.w;
    const char *addr = (const char *)info->si_addr;
    if (!w || !w->regions || addr < w->regions || addr >= w->regions + (size_t)w->nregions * STACK_REGION) {
        chain_fault(sig, info, context);
        return;
    }
    size_t region = (size_t)(addr - w->regions) / STACK_REGION;
    if (addr >= w->regions + (region + 1) * STACK_REGION - w->stack_bytes) {  // not the guard: a bad pointer
        chain_fault(sig, info, context);
        return;
    }
    Block *b = &w->block;
    Launch *L = b->launch;
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, region_header(w, (int)region)->linear);
    t.add(": stack overflow: the thread used more than its %zu KiB stack (its local arrays take %zu KiB, the rest is "
          "HIDET_LANG_EMU_STACK_KB=%zu KiB); set HIDET_LANG_EMU_STACK_KB higher",
          (w->stack_bytes - HEADER_BYTES) / 1024, L->local_bytes / 1024, L->stack_kb);
    record_error(L, "%s", buf);
    b->failed = 1;
    Ctx abandoned;
    ctx_swap(&abandoned, &b->main);  // leaves the signal stack for good (SA_NODEFER: the signal is not blocked)
    __builtin_trap();
}

// Once per module: put on_fault in front of the SIGSEGV and SIGBUS handlers.
static void install_fault_handler() {
    static int installed = 0;
    int expected = 0;
    if (!__atomic_compare_exchange_n(&installed, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
    sigaction(SIGBUS, &action, &g_previous_bus);
}

// A thread's first worker of this module: the fault handler, and an alternate signal stack to run it on unless
// the thread has one (kept in the thread's holder until the thread exits: see unguard_thread).
static void guard_thread(WorkerHolder *h) {
    install_fault_handler();
    stack_t current;
    if (h->alt_stack || sigaltstack(nullptr, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return;
    h->alt_stack = (char *)malloc(ALT_STACK_BYTES);
    if (!h->alt_stack) return;
    stack_t mine;
    mine.ss_sp = h->alt_stack;
    mine.ss_size = ALT_STACK_BYTES;
    mine.ss_flags = 0;
    if (sigaltstack(&mine, nullptr) != 0) {
        free(h->alt_stack);
        h->alt_stack = nullptr;
    }
}

// The thread exits: take down and free the alternate signal stack this module installed.
static void unguard_thread(WorkerHolder *h) {
    stack_t current;
    if (h->alt_stack && sigaltstack(nullptr, &current) == 0 && current.ss_sp == h->alt_stack) {
        stack_t off;
        memset(&off, 0, sizeof off);
        off.ss_flags = SS_DISABLE;
        sigaltstack(&off, nullptr);
    }
    free(h->alt_stack);
    h->alt_stack = nullptr;
}

// ---- A module's workers and their release -----------------------------------------------------------------
// A worker (the state, fiber stacks, dynamic shared memory and checking-mode shadows an OS thread needs to run the
// module's blocks) is created by the thread's first launch of the module and kept for its later launches. Its
// stacks take about two memory maps each (the stack and its guard), and the process's maps are limited
// (vm.max_map_count), so a process that runs many modules releases the workers of those it has not run lately
// (codegen/emulator_memory.py): the module registers the threads that hold a worker, so that
// hl_emu_release_workers can free every one of them from any thread. Launches hold g_launching shared; a release
// takes it exclusively or gives up (a launch of the module is running; the caller tries again later).

static pthread_rwlock_t g_launching = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t g_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static WorkerHolder *g_registry = nullptr;  // the holders with a worker (guarded by g_registry_lock)

static void unregister(WorkerHolder *h) {
    if (h->prev)
        h->prev->next = h->next;
    else
        g_registry = h->next;
    if (h->next) h->next->prev = h->prev;
    h->prev = h->next = nullptr;
}

// The calling thread's worker for this module, created (and registered) by its first launch; null when out of
// memory (a launch error).
static Worker *thread_worker(Launch *L) {
    WorkerHolder *h = &t_worker;
    if (h->w) return h->w;
    Worker *w = (Worker *)calloc(1, sizeof(Worker));
    if (!w) {
        record_error(L, "CUDA emulator: kernel '%s': out of memory for a worker", L->name);
        return nullptr;
    }
    guard_thread(h);
    pthread_mutex_lock(&g_registry_lock);
    h->w = w;
    h->next = g_registry;
    if (g_registry) g_registry->prev = h;
    g_registry = h;
    pthread_mutex_unlock(&g_registry_lock);
    return w;
}

// The thread exits: its worker goes (unless a release took it already), then its alternate signal stack.
WorkerHolder::~WorkerHolder() {
    pthread_mutex_lock(&g_registry_lock);
    if (w) {
        unregister(this);
        worker_free(w);
        w = nullptr;
    }
    pthread_mutex_unlock(&g_registry_lock);
    unguard_thread(this);
}

// Free every worker of the module; their threads' next launches create new ones. 0, or -1 when a launch of the
// module is running (nothing is freed).
static int release_workers() {
    if (pthread_rwlock_trywrlock(&g_launching) != 0) return -1;
    pthread_mutex_lock(&g_registry_lock);
    while (WorkerHolder *h = g_registry) {
        unregister(h);
        worker_free(h->w);
        h->w = nullptr;
    }
    pthread_mutex_unlock(&g_registry_lock);
    pthread_rwlock_unlock(&g_launching);
    return 0;
}

// ---- Running a launch -------------------------------------------------------------------------------------
// Stacks, workers, the order of the blocks, the fast path, and the emulator's entry points: one copy per
// module (each module's shared library links this object); `protected` visibility exports the entry points and
// binds a module's own calls to its own copy even when another module's symbols are global.

static size_t page_size() {
    static size_t ps = 0;
    if (!ps) ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

// Say once (a module) that stacks run unguarded: the process is short of memory maps.
static void report_unguarded(Launch *L, int count) {
    static int reported = 0;
    if (__atomic_exchange_n(&reported, 1, __ATOMIC_RELAXED)) return;
    fprintf(stderr,
            "hidet_lang: CUDA emulator: kernel '%s': the process is short of memory maps (vm.max_map_count), so its "
            "%d fiber stacks run without overflow guards: a stack overflow may corrupt a neighbouring stack instead "
            "of failing the launch (said once a module)\n",
            L->name, count);
}

// Map `count` stack regions: each STACK_REGION-aligned, PROT_NONE but for its top `stack_bytes` (so the rest
// below is the guard), with the header at the top pointing to the worker's state.
static bool map_regions(Worker *w, Launch *L, int count) {
    unmap_regions(w);
    size_t bytes = STACK_REGION * (size_t)(count + 1);
    void *mem = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        record_error(L, "CUDA emulator: kernel '%s': could not reserve %zu bytes for %d fiber stacks", L->name, bytes,
                     count);
        return false;
    }
    w->map = (char *)mem;
    w->map_bytes = bytes;
    w->regions = (char *)(((uintptr_t)mem + STACK_REGION - 1) & ~(STACK_REGION - 1));
    bool guarded = true;
    for (int i = 0; i < count && guarded; ++i) {
        char *top = w->regions + (size_t)(i + 1) * STACK_REGION;
        guarded = mprotect(top - L->stack_bytes, L->stack_bytes, PROT_READ | PROT_WRITE) == 0;
    }
    // Each guarded stack costs two memory maps; past the system's limit (with many workers and 1024-thread
    // blocks, or a process whose other maps leave too few), make the whole mapping writable instead, and say so:
    // a stack can then grow unnoticed into the untouched rest of its 1 MiB region, and an overflow beyond that
    // corrupts a neighbour.
    if (!guarded) {
        if (mprotect(w->map, bytes, PROT_READ | PROT_WRITE) != 0) {
            record_error(L, "CUDA emulator: kernel '%s': could not map %d fiber stacks of %zu KiB", L->name, count,
                         L->stack_bytes / 1024);
            munmap(w->map, w->map_bytes);
            w->map = nullptr;
            w->regions = nullptr;
            return false;
        }
        report_unguarded(L, count);
    }
    w->map_count = guarded ? 2 * (long)count + 1 : 1;
    __atomic_add_fetch(&g_held_maps, w->map_count, __ATOMIC_RELAXED);
    for (int i = 0; i < count; ++i) region_header(w, i)->st = &w->state;
    w->nregions = count;
    w->stack_bytes = L->stack_bytes;
    return true;
}

// Make the worker ready for the launch: stacks, thread indices, warps, dynamic shared memory, state.
static bool prepare_worker(Worker *w, Launch *L) {
    int n = L->nthreads;
    bool fibers = (L->needs_fibers && n > 1) || L->cluster_size > 1;  // a cluster's blocks wait for each other
    int need = fibers ? n + 1 : 1;
    if (w->nregions < need || w->stack_bytes < L->stack_bytes) {  // more, larger stacks serve smaller kernels too
        if (!map_regions(w, L, need > w->nregions ? need : w->nregions)) return false;
    }
    uint3 d = L->block;
    if (fibers && (w->header_dims.x != d.x || w->header_dims.y != d.y || w->header_dims.z != d.z)) {
        int i = 0;
        for (unsigned z = 0; z < d.z; ++z)
            for (unsigned y = 0; y < d.y; ++y)
                for (unsigned x = 0; x < d.x; ++x) {
                    Header *h = region_header(w, i + 1);
                    h->thread_idx = uint3{x, y, z};
                    h->linear = i++;
                }
        w->header_dims = d;
    }
    for (int k = 0; k < (n + 31) / 32; ++k) {
        int lanes = n - 32 * k < 32 ? n - 32 * k : 32;
        w->warps[k].exist = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
        w->warps[k].arrived = 0;
    }
    if (L->dsmem > w->dsmem_cap || !w->dsmem) {  // never null, even for 0 bytes
        free(w->dsmem);
        // 1024-byte aligned, as a GPU's dynamic shared memory starts where a kernel declares no static shared
        // memory (the 128-byte swizzle of TMA and wgmma tiles needs that alignment)
        size_t bytes = L->dsmem ? (L->dsmem + 1023) / 1024 * 1024 : 1024;
        w->dsmem = (char *)aligned_alloc(1024, bytes);
        w->dsmem_cap = w->dsmem ? bytes : 0;
        if (!w->dsmem) {
            record_error(L, "CUDA emulator: kernel '%s': could not allocate %zu bytes of dynamic shared memory",
                         L->name, L->dsmem);
            return false;
        }
    }
    Block *b = &w->block;
    b->launch = L;
    b->st = &w->state;
    b->entry = L->entry;
    b->block_fn = fibers || L->needs_fibers ? nullptr : L->block_fn;
    b->args = L->args;
    b->n = n;
    b->fibers = fibers;
    b->cluster = nullptr;  // run_cluster sets it
    b->rank = 0;
    b->fib = w->fib;
    b->warps = w->warps;
    b->queue = w->queue;
    w->state.block = b;
    w->state.block_dim = L->block;
    w->state.grid_dim = L->grid;
    w->state.dyn_smem = w->dsmem;
    w->state.dyn_smem_bytes = L->dsmem;
    w->state.fail_site = w->fail_site;
    w->state.fail_index = w->fail_index;
    w->state.fail_extent = w->fail_extent;
    w->state.fail_bytes = w->fail_bytes;
    return true;
}

static void run_block_plain(Block *b, Worker *w) {
    ctx_init(&b->plain, (char *)region_header(w, 0), w->stack_bytes - HEADER_BYTES, plain_main, b);
    ctx_swap(&b->main, &b->plain);
}

// The index in grid `g` of the launch's k-th unit (block or cluster) in its visiting order.
static inline uint3 unit_index(const Launch *L, long long k, uint3 g) {
    uint64_t id = L->order ? L->order[k] : L->reverse ? L->nunits - 1 - (uint64_t)k : (uint64_t)k;
    return uint3{(unsigned)(id % g.x), (unsigned)(id / g.x % g.y), (unsigned)(id / ((uint64_t)g.x * g.y))};
}

// The index of the launch's k-th block in its visiting order (a launch without clusters).
static inline uint3 block_index(const Launch *L, long long k) { return unit_index(L, k, L->grid); }

// The fast path: on stack region 0, the kernel's block function runs every thread of each block itself, for the
// blocks [fast_first, fast_last) (one switch for many blocks). A failure in a "header" block function
// (fail_access, abort_block) returns to the worker directly; the remaining blocks are not run (the launch stops).
static void fast_main(void *arg) {
    Block *b = (Block *)arg;
    Launch *L = b->launch;
    for (long long k = b->fast_first; k < b->fast_last; ++k) {
        if (__atomic_load_n(&L->stop, __ATOMIC_RELAXED)) break;
        b->st->block_idx = block_index(L, k);
        ++b->serial;
        b->block_fn(b->args);
    }
    ctx_swap(&b->plain, &b->main);
    __builtin_trap();  // never resumed
}

static void run_blocks_fast(Block *b, Worker *w) {
    ctx_init(&b->plain, (char *)region_header(w, 0), w->stack_bytes - HEADER_BYTES, fast_main, b);
    ctx_swap(&b->main, &b->plain);
}

// Make every thread of the block a fiber about to start, all in the run queue.
static void start_fibers(Block *b, Worker *w) {
    int n = b->n;
    b->done = 0;
    b->bar_count = 0;
    for (int k = 0; k < (n + 31) / 32; ++k) b->warps[k].arrived = 0;
    for (int i = 0; i < n; ++i) {
        Fiber &f = b->fib[i];
        f.state = F_READY;
        f.cluster_arrived = 0;
        ctx_init(&f.ctx, (char *)region_header(w, i + 1), w->stack_bytes - HEADER_BYTES, fiber_main, b);
        b->queue[i] = i;
    }
    b->qhead = 0;
    b->qtail = (unsigned)n;
}

// Run the block's next runnable fiber until no fiber of the block can run (or the block fails).
static inline void resume_block(Block *b) {
    int i = b->queue[b->qhead++ & QMASK];
    ctx_swap(&b->main, &b->fib[i].ctx);
}

static void run_block_fibers(Block *b, Worker *w) {
    int n = b->n;
    start_fibers(b, w);
    resume_block(b);
    if (b->failed || b->done == n) return;
    if (__atomic_load_n(&b->launch->asserted, __ATOMIC_ACQUIRE)) return;  // abandoned after an assertion
    int at_barrier = 0, at_warp = 0, exited = 0, lines = 0, line = -1;
    for (int i = 0; i < n; ++i) {
        const Fiber &f = b->fib[i];
        if (f.state == F_BARRIER) {
            ++at_barrier;
            if (f.line != line) ++lines, line = f.line;
        }
        at_warp += f.state == F_WARP;
        exited += f.state == F_DONE;
    }
    const char *title = "deadlock: no thread of the block can proceed";
    if (lines > 1)
        title = "deadlock (barrier divergence): threads wait at different barriers";
    else if (at_barrier && exited)
        title = "deadlock: threads exited while other threads wait at a barrier (undefined behaviour in CUDA)";
    else if (at_warp)
        title = "deadlock: a warp-collective operation waits for a lane that exited or waits elsewhere";
    record_states(b, title);
}

// ---- Thread block clusters: the blocks of a cluster run together (emulator_cluster.h) ----------------------
// The workers of a cluster's blocks: the OS thread's own for rank 0 and its peers for the others, made ready for
// the launch, with the cluster's state.
static bool prepare_cluster(Worker *w, Launch *L) {
    if (!w->cluster) w->cluster = (Cluster *)calloc(1, sizeof(Cluster));
    if (!w->cluster) {
        record_error(L, "CUDA emulator: kernel '%s': out of memory for a cluster", L->name);
        return false;
    }
    for (int r = 1; r < L->cluster_size; ++r) {
        Worker *&peer = w->peers[r - 1];
        if (!peer) peer = (Worker *)calloc(1, sizeof(Worker));
        if (!peer) {
            record_error(L, "CUDA emulator: kernel '%s': out of memory for a cluster's worker", L->name);
            return false;
        }
        if (!prepare_worker(peer, L)) return false;
    }
    return true;
}

// Run cluster `k` of the launch (in its visiting order): start every block's fibers, then resume the blocks in
// turn until all have finished, one fails, or none can run (a deadlock report).
static void run_cluster(Worker *w, Launch *L, long long k) {
    Cluster *c = w->cluster;
    c->size = L->cluster_size;
    uint3 cl = L->cluster, g = L->grid;
    uint3 cid = unit_index(L, k, uint3{g.x / cl.x, g.y / cl.y, g.z / cl.z});  // in the grid of clusters
    for (int r = 0; r < c->size; ++r) {
        Worker *pw = r ? w->peers[r - 1] : w;
        Block *b = &pw->block;
        unsigned x = (unsigned)r % cl.x, y = (unsigned)r / cl.x % cl.y, z = (unsigned)r / (cl.x * cl.y);
        pw->state.block_idx = uint3{cid.x * cl.x + x, cid.y * cl.y + y, cid.z * cl.z + z};
        b->failed = 0;
        b->epoch = 1;
        ++b->serial;
        b->cluster = c;
        b->rank = r;
        c->blocks[r] = b;
        start_fibers(b, pw);
    }
    c->phase = 0;
    c->exited = 0;
    c->waiting_for = cluster_expected(c);
    for (;;) {
        bool ran = false, finished = true;
        for (int r = 0; r < c->size; ++r) {
            Block *b = c->blocks[r];
            if (b->qhead != b->qtail) {
                ran = true;
                resume_block(b);
                if (b->failed || __atomic_load_n(&L->asserted, __ATOMIC_ACQUIRE)) return;
            }
            finished = finished && b->done == b->n;
        }
        if (finished) return;
        if (!ran) {
            cluster_deadlock(c);
            return;
        }
    }
}

static void run_worker(Launch *L) {
    Worker *w = thread_worker(L);
    bool ok = w && prepare_worker(w, L);  // without a worker, the thread still takes part in the loops below
    if (L->cluster_size > 1) {
        ok = ok && prepare_cluster(w, L);
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (long long k = 0; k < (long long)L->nunits; ++k) {
            if (!ok || __atomic_load_n(&L->stop, __ATOMIC_RELAXED)) continue;
            run_cluster(w, L, k);
#ifdef HL_EMU_PROFILE
            for (int r = 0; r < L->cluster_size; ++r) profile_block_end(w->cluster->blocks[r]);
#endif
        }
        return;
    }
    Block *b = w ? &w->block : nullptr;
    State *st = w ? &w->state : nullptr;
    long long nblocks = (long long)L->nblocks;
#ifdef _OPENMP
    long long chunk = nblocks / ((long long)omp_get_num_threads() * 16);
    if (chunk < 1) chunk = 1;
#else
    long long chunk = nblocks;
#endif
    if (L->block_fn && !L->needs_fibers) {  // the fast path (as prepare_worker decides, in every worker)
        long long nchunks = (nblocks + chunk - 1) / chunk;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (long long c = 0; c < nchunks; ++c) {
            if (!ok || __atomic_load_n(&L->stop, __ATOMIC_RELAXED)) continue;
            b->fast_first = c * chunk;
            b->fast_last = nblocks - b->fast_first < chunk ? nblocks : b->fast_first + chunk;
            run_blocks_fast(b, w);
        }
        return;
    }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, chunk)
#endif
    for (long long k = 0; k < nblocks; ++k) {
        if (!ok || __atomic_load_n(&L->stop, __ATOMIC_RELAXED)) continue;
        st->block_idx = block_index(L, k);
        b->failed = 0;
        b->epoch = 1;
        ++b->serial;
        if (b->fibers)
            run_block_fibers(b, w);
        else
            run_block_plain(b, w);
#ifdef HL_EMU_PROFILE
        profile_block_end(b);
#endif
    }
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Read the environment into the launch: stack size (HIDET_LANG_EMU_STACK_KB for frames, plus the kernel's local
// arrays) and block order.
static void configure(Launch *L, uint32_t **order_out) {
    const char *kb = getenv("HIDET_LANG_EMU_STACK_KB");
    long stack_kb = 64;
    long max_kb = (long)((STACK_REGION - page_size()) / 1024);
    if (kb && *kb) {
        char *end = nullptr;
        stack_kb = strtol(kb, &end, 10);
        if (*end || stack_kb < 16 || stack_kb > max_kb) {
            record_error(L, "CUDA emulator: HIDET_LANG_EMU_STACK_KB=%s: expected a whole number of KiB from 16 to %ld",
                         kb, max_kb);
            return;
        }
    }
    size_t ps = page_size();
    L->stack_kb = (size_t)stack_kb;
    L->stack_bytes = ((size_t)stack_kb * 1024 + L->local_bytes + HEADER_BYTES + ps - 1) / ps * ps;
    if (L->stack_bytes > STACK_REGION - ps) {
        record_error(L,
                     "CUDA emulator: kernel '%s': its local arrays (%zu KiB) and HIDET_LANG_EMU_STACK_KB=%ld need "
                     "more than the %zu KiB a thread's stack may have",
                     L->name, L->local_bytes / 1024, stack_kb, (size_t)(STACK_REGION - ps) / 1024);
        return;
    }
    const char *ord = getenv("HIDET_LANG_EMU_BLOCK_ORDER");
    if (!ord || !*ord || !strcmp(ord, "linear")) return;
    if (!strcmp(ord, "reverse")) {
        L->reverse = 1;
        return;
    }
    if (strcmp(ord, "random")) {
        record_error(L, "CUDA emulator: HIDET_LANG_EMU_BLOCK_ORDER=%s: expected 'random', 'reverse' or 'linear'",
                     ord);
        return;
    }
    if (L->nunits < 2) return;
    if (L->nunits > (1ull << 32)) {
        record_error(L, "CUDA emulator: kernel '%s': HIDET_LANG_EMU_BLOCK_ORDER=random supports at most 2^32 blocks",
                     L->name);
        return;
    }
    uint32_t *order = (uint32_t *)malloc(sizeof(uint32_t) * L->nunits);
    if (!order) {
        record_error(L, "CUDA emulator: kernel '%s': out of memory for a random block order", L->name);
        return;
    }
    const char *seed_text = getenv("HIDET_LANG_EMU_SEED");
    static uint64_t counter = 0;
    uint64_t seed = seed_text && *seed_text ? strtoull(seed_text, nullptr, 10)
                                            : (uint64_t)time(nullptr) ^ __atomic_add_fetch(&counter, 0x9e37, 0);
    for (uint64_t i = 0; i < L->nunits; ++i) order[i] = (uint32_t)i;
    for (uint64_t i = L->nunits - 1; i > 0; --i) {
        uint64_t j = splitmix64(&seed) % (i + 1);
        uint32_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    L->order = order;
    *order_out = order;
}

static int launch(void (*entry)(void **), void (*block_fn)(void **), const char *kernel_name, int needs_fibers,
                  unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  size_t dynamic_smem_bytes, void **args, size_t local_bytes, uint3 cluster) {
    Launch *L = (Launch *)calloc(1, sizeof(Launch));
    if (!L) {
        snprintf(t_error, sizeof t_error, "CUDA emulator: out of memory");
        return 1;
    }
    const char *name = kernel_name ? kernel_name : "?";
    L->entry = entry;
    L->block_fn = block_fn;
    L->args = args;
    L->name = name;
    L->needs_fibers = needs_fibers;
    L->grid = uint3{gx, gy, gz};
    L->block = uint3{bx, by, bz};
    L->dsmem = dynamic_smem_bytes;
    L->local_bytes = local_bytes;
    L->nthreads = (int)((uint64_t)bx * by * bz > (uint64_t)MAX_THREADS ? 0 : bx * by * bz);
    L->nblocks = (uint64_t)gx * gy * gz;
    L->cluster = cluster;
    L->cluster_size = (int)(cluster.x * cluster.y * cluster.z);
    L->nunits = L->cluster_size > 0 ? L->nblocks / (uint64_t)L->cluster_size : 0;
    if (L->cluster_size > 1) L->block_fn = nullptr;  // the blocks of a cluster run as fibers    // Generated launchers check the configuration before they get here (with the DSL line); these checks guard
    // direct callers of the launch API.
    if (!entry)
        record_error(L, "CUDA emulator: kernel '%s': no entry function", name);
    else if (!gx || !gy || !gz || gx > HL_MAX_GRID_DIM_X || gy > HL_MAX_GRID_DIM_Y || gz > HL_MAX_GRID_DIM_Z)
        record_error(L,
                     "CUDA emulator: kernel '%s': grid_dim (%u, %u, %u) is invalid: each dimension must be at least "
                     "1, x at most %u, y at most %u, z at most %u",
                     name, gx, gy, gz, (unsigned)HL_MAX_GRID_DIM_X, (unsigned)HL_MAX_GRID_DIM_Y,
                     (unsigned)HL_MAX_GRID_DIM_Z);
    else if (!bx || !by || !bz || bx > HL_MAX_BLOCK_DIM_X || by > HL_MAX_BLOCK_DIM_Y || bz > HL_MAX_BLOCK_DIM_Z ||
             L->nthreads == 0)
        record_error(L,
                     "CUDA emulator: kernel '%s': block_dim (%u, %u, %u) is invalid: each dimension must be at least "
                     "1, x at most %u, y at most %u, z at most %u, and a block at most %d threads",
                     name, bx, by, bz, (unsigned)HL_MAX_BLOCK_DIM_X, (unsigned)HL_MAX_BLOCK_DIM_Y,
                     (unsigned)HL_MAX_BLOCK_DIM_Z, MAX_THREADS);
    else if (!cluster.x || !cluster.y || !cluster.z || L->cluster_size > HL_MAX_CLUSTER_SIZE || gx % cluster.x ||
             gy % cluster.y || gz % cluster.z)
        record_error(L,
                     "CUDA emulator: kernel '%s': cluster_dim (%u, %u, %u) is invalid: at most %d blocks, and the grid "
                     "(%u, %u, %u) a multiple of it",
                     name, cluster.x, cluster.y, cluster.z, (int)HL_MAX_CLUSTER_SIZE, gx, gy, gz);
    uint32_t *order = nullptr;
    if (!L->failed) configure(L, &order);
#ifdef HL_EMU_PROFILE
    if (!L->failed) profile_launch(name, L->nblocks, L->nthreads);
#endif
    if (!L->failed) {
        pthread_rwlock_rdlock(&g_launching);  // no release of the workers while they run
#ifdef _OPENMP
        int workers = omp_get_max_threads();
        if ((uint64_t)workers > L->nunits) workers = (int)L->nunits;
        if (workers > 1) {
#pragma omp parallel num_threads(workers)
            run_worker(L);
        } else {
            run_worker(L);
        }
#else
        run_worker(L);
#endif
        pthread_rwlock_unlock(&g_launching);
    }
    fflush(stdout);
    int rc = 0;
    if (L->failed) {
        snprintf(t_error, sizeof t_error, "%s", L->msg);
        rc = 1;
    }
    free(order);
    free(L);
    return rc;
}

}  // namespace hl_emu

extern "C" int hl_emu_launch(void (*entry)(void **), const char *kernel_name, int needs_fibers, unsigned gx,
                             unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                             size_t dynamic_smem_bytes, void **args) {
    return ::hl_emu::launch(entry, nullptr, kernel_name, needs_fibers, gx, gy, gz, bx, by, bz, dynamic_smem_bytes,
                            args, 0, uint3{1, 1, 1});
}

extern "C" int hl_emu_launch_blocks(void (*entry)(void **), void (*block_fn)(void **), const char *kernel_name,
                                    int needs_fibers, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, size_t dynamic_smem_bytes, void **args, size_t local_bytes) {
    return ::hl_emu::launch(entry, block_fn, kernel_name, needs_fibers, gx, gy, gz, bx, by, bz, dynamic_smem_bytes,
                            args, local_bytes, uint3{1, 1, 1});
}

// A launch whose blocks form clusters of (cx, cy, cz) blocks that run together (emulator_cluster.h).
extern "C" int hl_emu_launch_clusters(void (*entry)(void **), void (*block_fn)(void **), const char *kernel_name,
                                      int needs_fibers, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                      unsigned by, unsigned bz, size_t dynamic_smem_bytes, void **args,
                                      size_t local_bytes, unsigned cx, unsigned cy, unsigned cz) {
    return ::hl_emu::launch(entry, block_fn, kernel_name, needs_fibers, gx, gy, gz, bx, by, bz, dynamic_smem_bytes,
                            args, local_bytes, uint3{cx, cy, cz});
}

extern "C" const char *hl_emu_error_message(void) { return ::hl_emu::t_error; }

// Free the workers of this module (their stacks above all); 0, or -1 while a launch of it runs (see
// "A module's workers" above).
extern "C" int hl_emu_release_workers(void) { return ::hl_emu::release_workers(); }

// About how many memory maps the stacks of this module's workers take now.
extern "C" long hl_emu_held_maps(void) { return __atomic_load_n(&::hl_emu::g_held_maps, __ATOMIC_RELAXED); }

extern "C" int hl_emu_take_assert_line(void) {
    return __atomic_exchange_n(&::hl_emu::g_assert_line, 0, __ATOMIC_SEQ_CST);
}

#ifdef HL_EMU_PROFILE
// The profile build's counting and its table (the runtime's own: one copy a module).
#include "emulator_profile.cpp"
#endif
