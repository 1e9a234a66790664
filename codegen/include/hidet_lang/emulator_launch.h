// hidet_lang CUDA emulator: running a launch.
// Stacks, workers, the order of the blocks, the fast path, and the emulator's entry points: one copy per
// module (each module is its own shared library); `protected` visibility binds a module's own calls to its
// own copy even when another module's symbols are global.
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_LAUNCH_H
#define HIDET_LANG_EMULATOR_LAUNCH_H

namespace hl_emu {

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

extern "C" __attribute__((visibility("protected"))) int hl_emu_launch(void (*entry)(void **), const char *kernel_name,
                                                                      int needs_fibers, unsigned gx, unsigned gy,
                                                                      unsigned gz, unsigned bx, unsigned by,
                                                                      unsigned bz, size_t dynamic_smem_bytes,
                                                                      void **args);
extern "C" __attribute__((visibility("protected"))) int hl_emu_launch_blocks(
    void (*entry)(void **), void (*block_fn)(void **), const char *kernel_name, int needs_fibers, unsigned gx,
    unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, size_t dynamic_smem_bytes, void **args,
    size_t local_bytes);
extern "C" __attribute__((visibility("protected"))) int hl_emu_launch_clusters(
    void (*entry)(void **), void (*block_fn)(void **), const char *kernel_name, int needs_fibers, unsigned gx,
    unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, size_t dynamic_smem_bytes, void **args,
    size_t local_bytes, unsigned cx, unsigned cy, unsigned cz);
extern "C" __attribute__((visibility("protected"))) const char *hl_emu_error_message(void);
extern "C" __attribute__((visibility("protected"))) int hl_emu_release_workers(void);
extern "C" __attribute__((visibility("protected"))) long hl_emu_held_maps(void);
extern "C" __attribute__((visibility("protected"))) int hl_emu_take_assert_line(void);

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
// emulator_workers.h).
extern "C" int hl_emu_release_workers(void) { return ::hl_emu::release_workers(); }

// About how many memory maps the stacks of this module's workers take now.
extern "C" long hl_emu_held_maps(void) { return __atomic_load_n(&::hl_emu::g_held_maps, __ATOMIC_RELAXED); }

extern "C" int hl_emu_take_assert_line(void) {
    return __atomic_exchange_n(&::hl_emu::g_assert_line, 0, __ATOMIC_SEQ_CST);
}

#endif  // HIDET_LANG_EMULATOR_LAUNCH_H
