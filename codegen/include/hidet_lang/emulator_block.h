// hidet_lang CUDA emulator: blocks.
// The state of a launch, of a block and of a worker (the OS thread that runs blocks); the reports of failures;
// running the threads of a block (as fibers, or one after the other); CUDA's barriers (macros: the call site's
// line identifies the barrier in reports) and device assertions.
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_BLOCK_H
#define HIDET_LANG_EMULATOR_BLOCK_H

namespace hl_emu {

enum : uint8_t { F_READY = 0, F_BARRIER = 1, F_WARP = 2, F_DONE = 3 };
enum : uint8_t { B_SYNC = 0, B_COUNT = 1, B_AND = 2, B_OR = 3 };
enum : uint8_t { W_IDX = 0, W_UP, W_DOWN, W_XOR, W_BALLOT, W_ANY, W_ALL, W_SYNCWARP, W_MMA_M16N8K16, W_LDMATRIX_X4,
               W_MMA_M16N8K16_BF16, W_LDMATRIX_X4_TRANS, W_MMA_M16N8K8_TF32 };

static const int MAX_THREADS = HL_MAX_THREADS_PER_BLOCK;
static const unsigned QMASK = MAX_THREADS - 1;  // the run queue is a ring of MAX_THREADS entries
static_assert(MAX_THREADS % 32 == 0 && (MAX_THREADS & (MAX_THREADS - 1)) == 0,
              "the run queue (a ring) and the warps need a power of two of at least 32 threads a block");

struct Fiber {
    Ctx ctx;
    uint8_t state;  // F_*
    uint8_t op;     // the barrier kind or warp operation it waits at
    int line;       // the generated line of that barrier / warp operation
    unsigned mask;  // the mask of that warp operation
    // the mbarrier it waits on (emulator_mbarrier.h); its arrival at the cluster barrier (emulator_cluster.h)
    const void *mbar;
    uint32_t cluster_phase;  // the cluster barrier's phase it arrived in
    uint8_t cluster_arrived;  // arrived, and not yet waited
};

struct Warp {
    uint32_t arrived;  // lanes waiting at a warp operation
    uint32_t exist;    // lanes that exist (the last warp of a block may be partial)
    uint32_t mask[32];
    int line[32];
    int param[32];
    int width[32];
    uint8_t op[32];
    uint64_t val[32];
    uint64_t res[32];
    uint32_t syncs;  // completed __syncwarp operations (checking mode: they order the lanes' shared accesses)
};

// Checking mode: the shadow of one byte of a registered shared array.
struct Shadow {
    uint32_t write_epoch, read_epoch;  // barrier epochs of the last write / reads (0: none)
    uint32_t write_syncs, read_syncs;  // the warp's __syncwarp count at the last write / read
    uint16_t writer, reader;           // linear ids of the last writer / reader
    uint16_t other_reader;             // with several readers: one that is not `reader`
    uint8_t written;                   // written since the block started
    uint8_t readers;                   // 0, 1, or 2 for several readers in the read epoch
    uint8_t mixed;                     // the readers of the read epoch span several warps
};

struct SharedArray {
    const char *base;
    size_t bytes;
    const char *name, *where;
    Shadow *shadow;
    size_t shadow_cap;
    uint64_t serial;  // the block run it was registered in
};

static const int MAX_SHARED_ARRAYS = 64;

struct Cluster;  // emulator_cluster.h

struct Launch {
    void (*entry)(void **);
    void (*block_fn)(void **);  // the fast path of a barrier-free kernel (every thread of a block), or null
    void **args;
    const char *name;
    int needs_fibers;
    uint3 grid, block;
    size_t dsmem;
    uint64_t nblocks;
    uint3 cluster;      // the thread block cluster's shape (1, 1, 1: none)
    int cluster_size;   // its blocks
    uint64_t nunits;    // what the workers share out: blocks, or clusters (their blocks run together)
    int nthreads;
    size_t stack_bytes;     // read-write bytes at the top of each stack region (header included)
    size_t local_bytes;     // the kernel's local arrays, part of stack_bytes
    size_t stack_kb;        // HIDET_LANG_EMU_STACK_KB: the rest of stack_bytes (frames), in KiB
    const uint32_t *order;  // block visiting order, or null
    int reverse;
    int stop;      // set on failure or assertion: start no more blocks
    int failed;    // the first failure is recorded (CAS)
    int asserted;  // a device assertion failed in this launch
    char msg[4096];
};

struct Block {
    Launch *launch;
    State *st;
    void (*entry)(void **);
    void (*block_fn)(void **);      // set when the blocks run on the fast path (see run_blocks_fast)
    long long fast_first, fast_last;  // the fast path: the launch's blocks [first, last) run by one switch
    void **args;
    int n;
    int fibers;
    int done;  // threads finished
    Fiber *fib;
    Warp *warps;
    int *queue;
    unsigned qhead, qtail;
    int bar_count, bar_line, bar_kind, bar_acc, bar_mixed, bar_result;
    uint32_t epoch;   // barriers completed in this block, plus 1
    uint64_t serial;  // counts the blocks this worker ran
    int nshared;      // checking mode: shared arrays registered (entries of an earlier block are stale)
    SharedArray shared[MAX_SHARED_ARRAYS];
    int failed;
    Cluster *cluster;  // the cluster it runs in (null: none), and its rank there
    int rank;
    void *wgmma;  // its threads' warpgroup MMA state (emulator_wgmma.h), or null
    Ctx main;   // the worker, while a block runs
    Ctx plain;  // the runner of a block without fibers
};

struct Worker {
    State state;
    Block block;
    Fiber fib[MAX_THREADS];
    Warp warps[MAX_THREADS / 32];
    int queue[MAX_THREADS];
    uint3 header_dims;  // block dims the fiber headers hold thread indices for
    char *regions;      // nregions STACK_REGION-aligned regions: 0 runs blocks without fibers, i + 1 fiber i
    int nregions;
    size_t stack_bytes;
    char *map;
    size_t map_bytes;
    long map_count;  // the memory maps (VMAs) `map` takes: 2 a guarded region plus 1, or 1 unguarded
    char *dsmem;
    size_t dsmem_cap;
    Worker *peers[HL_MAX_CLUSTER_SIZE - 1];  // the workers of a cluster's other blocks (run by this OS thread)
    Cluster *cluster;
    int fail_site[MAX_THREADS];  // State::fail_*: all 0 but while a fast block reports a failure
    long long fail_index[MAX_THREADS];
    long long fail_extent[MAX_THREADS];
    long long fail_bytes[MAX_THREADS];
};

static inline Header *region_header(Worker *w, int region) {
    return (Header *)(w->regions + (size_t)(region + 1) * STACK_REGION - HEADER_BYTES);
}

static long g_held_maps = 0;  // the memory maps the stacks of this module's workers take (see map_regions)

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
    unmap_regions(w);
    for (int i = 0; i < MAX_SHARED_ARRAYS; ++i) free(w->block.shared[i].shadow);
    free(w->dsmem);
    free(w);
}

// An OS thread's worker for this module (created by its first launch, freed at the thread's exit or by a release:
// emulator_workers.h) and the alternate signal stack the thread runs the fault handler on, when this module
// installed it (emulator_stack_guard.h; it stays as long as the thread, across releases).
struct WorkerHolder {
    Worker *w = nullptr;
    char *alt_stack = nullptr;
    WorkerHolder *prev = nullptr, *next = nullptr;  // the module's registry of holders with a worker
    ~WorkerHolder();
};

static thread_local WorkerHolder t_worker;
static thread_local char t_error[4096];
static int g_assert_line = 0;

// Record the launch's first failure (later ones are dropped) and stop starting blocks.
static void record_error(Launch *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void record_error(Launch *L, const char *fmt, ...) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&L->failed, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(L->msg, sizeof L->msg, fmt, ap);
        va_end(ap);
    }
    __atomic_store_n(&L->stop, 1, __ATOMIC_RELEASE);
}

// A small append-only text buffer for reports.
struct Text {
    char *p;
    size_t cap, len;
    void add(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
        if (len + 1 >= cap) return;
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(p + len, cap - len, fmt, ap);
        va_end(ap);
        if (k > 0) len = (len + (size_t)k < cap) ? len + (size_t)k : cap - 1;
    }
};

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

static void where_prefix(Text &t, Block *b) {
    uint3 bi = b->st->block_idx;
    t.add("CUDA emulator: kernel '%s', block (%u, %u, %u): ", b->launch->name, bi.x, bi.y, bi.z);
}

static void describe_thread(Text &t, Block *b, int i) {
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
            default: t.add(" are runnable"); break;
        }
    }
    if (truncated) t.add("; (more groups omitted)");
    uint3 d = b->st->block_dim;
    if (d.y != 1 || d.z != 1)
        t.add(" (threads numbered threadIdx.x + threadIdx.y * %u + threadIdx.z * %u)", d.x, d.x * d.y);
}

// End the running block after a failure: back to the worker; the block's fibers are never resumed.
[[noreturn]] static void abort_block(Block *b) {
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

static inline void push_ready(Block *b, int i) {
    b->fib[i].state = F_READY;
    b->queue[b->qtail++ & QMASK] = i;
}

// The running fiber `from` waits (or has finished): run the next runnable fiber, or return to the worker when
// there is none. Returns when `from` is resumed.
static inline void run_next(Block *b, Fiber *from) {
    if (b->qhead != b->qtail) {
        int i = b->queue[b->qhead++ & QMASK];
        ctx_swap(&from->ctx, &b->fib[i].ctx);
    } else {
        ctx_swap(&from->ctx, &b->main);
    }
}

static void cluster_thread_exited(Block *b, Fiber *f);  // emulator_cluster.h

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

static int barrier(int line, int kind, int pred) {
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
    Fiber *fib = b->fib;
    for (int i = 0; i < n; ++i)
        if (fib[i].state == F_BARRIER) push_ready(b, i);
    return b->bar_result;
}

// A device assertion failed: record its line (the first one) and start no more blocks.
static inline void assert_fail(int line) {
    int expected = 0;
    __atomic_compare_exchange_n(&g_assert_line, &expected, line, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    Launch *L = hdr()->st->block->launch;
    __atomic_store_n(&L->asserted, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&L->stop, 1, __ATOMIC_RELEASE);
}

}  // namespace hl_emu

// CUDA's barriers
#define __syncthreads() ((void)::hl_emu::barrier(__LINE__, ::hl_emu::B_SYNC, 0))
#define __syncthreads_count(pred) ::hl_emu::barrier(__LINE__, ::hl_emu::B_COUNT, (pred))
#define __syncthreads_and(pred) ::hl_emu::barrier(__LINE__, ::hl_emu::B_AND, (pred))
#define __syncthreads_or(pred) ::hl_emu::barrier(__LINE__, ::hl_emu::B_OR, (pred))

#endif  // HIDET_LANG_EMULATOR_BLOCK_H
