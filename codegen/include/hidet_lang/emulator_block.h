// hidet_lang CUDA emulator: blocks.
// The state of a launch, of a block and of a worker (the OS thread that runs blocks); the reports of failures,
// CUDA's barriers (macros: the call site's line identifies the barrier in reports) and device assertions, declared
// here and defined in emulator_runtime.cpp with the running of a block's threads (as fibers, or one after the
// other); switching between a block's fibers (run_next), inline.
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_BLOCK_H
#define HIDET_LANG_EMULATOR_BLOCK_H

namespace hl_emu {

enum : uint8_t { F_READY = 0, F_BARRIER = 1, F_WARP = 2, F_DONE = 3 };
// (4: waiting on an mbarrier, emulator_mbarrier.h; 5: at the cluster barrier, emulator_cluster.h)
static const uint8_t F_WGMMA = 6;  // waiting for the rest of its warpgroup to issue its wgmma operations
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
#ifdef HL_EMU_PROFILE
    void *profile;  // the profile build's counts of the block being run (emulator_profile.cpp), or null
#endif
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

// Defined in emulator_runtime.cpp (hidden: each module's library links its own copy of the runtime).
// Record the launch's first failure (later ones are dropped) and stop starting blocks.
void record_error(Launch *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A report's start: "CUDA emulator: kernel '<name>', block (x, y, z): ".
void where_prefix(Text &t, Block *b);
// "thread i", with its threadIdx when the block is not one-dimensional.
void describe_thread(Text &t, Block *b, int i);
// End the running block after a failure: back to the worker; the block's fibers are never resumed.
[[noreturn]] void abort_block(Block *b);
// CUDA's barriers (`kind`: B_*) at the generated line `line`; the result of __syncthreads_count / _and / _or.
int barrier(int line, int kind, int pred);
// A device assertion failed: record its line (the first one) and start no more blocks.
void assert_fail(int line);

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

}  // namespace hl_emu

// CUDA's barriers
#define __syncthreads() ((void)::hl_emu::barrier(__LINE__, ::hl_emu::B_SYNC, 0))
#define __syncthreads_count(pred) ::hl_emu::barrier(__LINE__, ::hl_emu::B_COUNT, (pred))
#define __syncthreads_and(pred) ::hl_emu::barrier(__LINE__, ::hl_emu::B_AND, (pred))
#define __syncthreads_or(pred) ::hl_emu::barrier(__LINE__, ::hl_emu::B_OR, (pred))

#endif  // HIDET_LANG_EMULATOR_BLOCK_H
