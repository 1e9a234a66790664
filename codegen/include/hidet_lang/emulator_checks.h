// hidet_lang CUDA emulator: guarded and checked accesses, emitted by the code generator for the emulator
// (`where`: the DSL location), and the store guards of the fast path.
//
// hl_emu_store_guard(base, index, extent, name, where) -> &base[index]: every store into a kernel's tensor
//   argument; an index outside [0, extent) fails the launch instead of writing (extent < 0: unknown, no check).
// hl_emu_store_guard_in(base, index, origin, bytes, origin_name, name, where), hl_emu_checked_in(..., flags, name,
//   where): the same through a view of the tensor `origin`: the element must lie within the origin's `bytes`.
// hl_emu_checked(base, index, extent, flags, name, where) -> &base[index] (checking mode: every access): bounds
//   as above for reads, writes and addresses; for a shared array registered by hl_emu_shared_declared, a read of
//   bytes no thread of the block has written, and a race: two threads touching the same bytes, at least one
//   writing, with no barrier in between (nor a __syncwarp, for two lanes of one warp).
// hl_emu_dynamic_smem_bytes(), hl_emu_dynamic_shared(where): the bounds of the dynamic shared memory, which
//   stores through pointers into it are guarded by (checked in checking mode, where the first access registers it).
// hl_emu_division_by_zero(where): checking mode's `fail` of a zero integer divisor (int_division.h).
// hl_emu_conversion_warning(where, from, to, value): checking mode's `warn` of a float converted to an integer type
//   that cannot hold it (float_to_int.h): recorded with the block and thread for a warning; the thread goes on.
// hl_emu_shared_declared(array, bytes, name, where): at a shared array's declaration; the first thread of a
//   block to get there fills it with 0xff bytes (NaN for floats) and clears its shadow.
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_CHECKS_H
#define HIDET_LANG_EMULATOR_CHECKS_H

namespace hl_emu {

enum : int { ACCESS_READ = 1, ACCESS_WRITE = 2, SPACE_GLOBAL = 4, SPACE_SHARED = 8, SPACE_LOCAL = 16 };

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

[[noreturn]] static void fail_access(int flags, const char *name, long long index, long long extent,
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

[[noreturn]] static void fail_view_access(int flags, const char *name, long long index, const char *origin_name,
                                          long long offset, long long bytes, const char *where) {
    Header *h = hdr();
    Block *b = h->st->block;
    record_view_error(b, h->linear, flags, name, index, origin_name, offset, bytes, where);
    abort_block(b);
}

// Whether base[index] lies outside [origin, origin + bytes); `*offset`: its byte offset from `origin`.
template <class T>
static inline bool outside(const T *base, long long index, const void *origin, long long bytes, long long *offset) {
    *offset = (long long)((uintptr_t)base - (uintptr_t)origin) + index * (long long)sizeof(T);
    return *offset < 0 || *offset + (long long)sizeof(T) > bytes;
}

// The fast path of a barrier-free kernel (needs_fibers=0, outside checking mode): the code generator emits
// `<kernel>__block(void **args)`, launched through hl_emu_launch_blocks, which runs every thread of a block in a
// loop over (threadIdx.z, .y, .x) with the kernel body inlined, on stack region 0 (so hdr() still finds the
// block's state). It reads the block's constants once (FastBlock), and the thread indices are its loop
// variables. Two kinds:
// - the kernel calls no device function: nothing else reads the thread indices, so the loop over threadIdx.x is
//   an `omp simd` loop the compiler may vectorize, and a store guard that fails records (fast_store_fail; through
//   a view, fast_view_store_fail) the thread's linear id, index, extent (or offset and bytes) and guard site in
//   the worker's fail_* slots, skips the store and ends the thread; after the loop, fast_store_failed reports the failure of the lowest thread id (as the sequential run
//   would) and the block ends. The other threads of the block have run: on a GPU they would have too.
// - the kernel calls device functions: before each thread the loop stores its indices in the region's header,
//   where threadIdx in the callees and the store guards' slow path (fail_access) read them, as without the
//   fast path; the threads run in order.
struct FastBlock {
    uint3 block_idx, block_dim, grid_dim;
    char *smem;
    size_t smem_bytes;
    int *fail_site;
    long long *fail_index, *fail_extent, *fail_bytes;
};

static inline __attribute__((always_inline)) FastBlock fast_block() {
    State *st = hdr()->st;
    return FastBlock{st->block_idx, st->block_dim,  st->grid_dim,    st->dyn_smem,  st->dyn_smem_bytes,
                     st->fail_site, st->fail_index, st->fail_extent, st->fail_bytes};
}

// A store guard of the fast path failed in thread `thread`: record it (`site`: 1 + the guard's index in the
// kernel's table of sites); returns 1.
static inline __attribute__((always_inline)) int fast_store_fail(const FastBlock &fb, int thread, long long index,
                                                                  long long extent, int site) {
    fb.fail_site[thread] = site;
    fb.fail_index[thread] = index;
    fb.fail_extent[thread] = extent;
    return 1;
}

// The same for a store through a view whose element lies `offset` bytes from its origin of `bytes` bytes.
static inline __attribute__((always_inline)) int fast_view_store_fail(const FastBlock &fb, int thread,
                                                                       long long index, long long offset,
                                                                       long long bytes, int site) {
    fb.fail_bytes[thread] = bytes;
    return fast_store_fail(fb, thread, index, offset, site);
}

// After a fast block with failed store guards: report the lowest thread's; `sites` holds (name, where, origin)
// triples (origin: null but for a store through a view).
static __attribute__((noinline, cold)) void fast_store_failed(FastBlock fb, const char *const *sites) {
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

static SharedArray *find_shared(Block *b, const char *p) {
    for (int i = 0; i < b->nshared; ++i) {
        SharedArray *a = &b->shared[i];
        if (a->serial == b->serial && p >= a->base && p < a->base + a->bytes) return a;
    }
    return nullptr;
}

static void shared_declared(const void *array, size_t bytes, const char *name, const char *where) {
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
    memset((void *)base, 0xff, bytes);
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

static void shared_access(const char *p, size_t size, int flags, long long index, const char *where,
                          const char *op = nullptr) {
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

}  // namespace hl_emu

template <class T>
static inline T *hl_emu_store_guard(T *base, long long index, long long extent, const char *name, const char *where) {
    if (__builtin_expect(extent >= 0 && (unsigned long long)index >= (unsigned long long)extent, 0))
        ::hl_emu::fail_access(::hl_emu::ACCESS_WRITE, name, index, extent, where);
    return base + index;
}

template <class T>
static inline T *hl_emu_checked(T *base, long long index, long long extent, int flags, const char *name,
                                const char *where) {
    if (extent >= 0 && (unsigned long long)index >= (unsigned long long)extent)
        ::hl_emu::fail_access(flags, name, index, extent, where);
    if (flags & ::hl_emu::SPACE_SHARED) ::hl_emu::shared_access((const char *)(base + index), sizeof(T), flags, index, where);
    return base + index;
}

// Checking mode's cp.async: the copy (made at once, as the emulator's cp.async does) writes `bytes` bytes of
// shared memory, for the race and initialization checks.
static inline void hl_emu_cp_async_checked(void *dst, const void *src, int bytes, const char *where) {
    memcpy(dst, src, (size_t)bytes);
    ::hl_emu::shared_access((const char *)dst, (size_t)bytes, ::hl_emu::ACCESS_WRITE, 0, where, "cp.async");
}

// Checking mode's ldmatrix: each lane's row is a 16-byte read of shared memory, checked before the warp loads.
#define hl_emu_ldmatrix_x4_checked(dst, row, where)                                                            \
    (::hl_emu::shared_access((const char *)(row), 16, ::hl_emu::ACCESS_READ, 0, (where), "ldmatrix"),          \
     ::hl_emu::ldmatrix_x4(__LINE__, (dst), (row)))
#define hl_emu_ldmatrix_x4_trans_checked(dst, row, where)                                                      \
    (::hl_emu::shared_access((const char *)(row), 16, ::hl_emu::ACCESS_READ, 0, (where), "ldmatrix"),          \
     ::hl_emu::ldmatrix_x4_trans(__LINE__, (dst), (row)))

// A store through a view of a kernel's tensor argument or of the dynamic shared memory, `origin` (`bytes`
// bytes): the element must lie within it.
template <class T>
static inline T *hl_emu_store_guard_in(T *base, long long index, const void *origin, long long bytes,
                                       const char *origin_name, const char *name, const char *where) {
    long long offset;
    if (__builtin_expect(::hl_emu::outside(base, index, origin, bytes, &offset), 0))
        ::hl_emu::fail_view_access(::hl_emu::ACCESS_WRITE, name, index, origin_name, offset, bytes, where);
    return base + index;
}

// Checking mode's access through a view of the tensor `origin`: its bounds are the origin's bytes.
template <class T>
static inline T *hl_emu_checked_in(T *base, long long index, const void *origin, long long bytes,
                                   const char *origin_name, int flags, const char *name, const char *where) {
    long long offset;
    if (::hl_emu::outside(base, index, origin, bytes, &offset))
        ::hl_emu::fail_view_access(flags, name, index, origin_name, offset, bytes, where);
    if (flags & ::hl_emu::SPACE_SHARED)
        ::hl_emu::shared_access((const char *)(base + index), sizeof(T), flags, index, where);
    return base + index;
}

// The bytes of the running block's dynamic shared memory (what its launch asked for).
static inline long long hl_emu_dynamic_smem_bytes(void) { return (long long)::hl_emu::hdr()->st->dyn_smem_bytes; }

// Checking mode: the block's dynamic shared memory, registered as a shared array by the block's first checked
// access of it (uninitialized reads and races are then found as in a `__shared__` array).
static inline char *hl_emu_dynamic_shared(const char *where) {
    ::hl_emu::State *st = ::hl_emu::hdr()->st;
    ::hl_emu::shared_declared(st->dyn_smem, st->dyn_smem_bytes, "dynamic_shared_memory", where);
    return st->dyn_smem;
}

// Checking mode: an integer division or modulo by zero (int_division.h's `fail`) ends the block with a report.
static void hl_emu_division_by_zero(const char *where) {
    ::hl_emu::Header *h = ::hl_emu::hdr();
    ::hl_emu::Block *b = h->st->block;
    char buf[1024];
    ::hl_emu::Text t{buf, sizeof buf, 0};
    ::hl_emu::where_prefix(t, b);
    ::hl_emu::describe_thread(t, b, h->linear);
    t.add(": integer division or modulo by zero at %s", where);
    ::hl_emu::record_error(b->launch, "%s", buf);
    ::hl_emu::abort_block(b);
}

// float_to_int.h, included after this part (it needs the half types), keeps the record of conversions.
static void hl_conversion_record(const char *message);
static void hl_conversion_describe(char *buf, size_t size, const char *where, const char *from, const char *to,
                                   double value);

// Checking mode: a float converted to an integer type that cannot hold it is recorded (float_to_int.h's `warn`).
static void hl_emu_conversion_warning(const char *where, const char *from, const char *to, double value) {
    ::hl_emu::Header *h = ::hl_emu::hdr();
    ::hl_emu::Block *b = h->st->block;
    char buf[512];
    ::hl_emu::Text t{buf, sizeof buf, 0};
    ::hl_emu::where_prefix(t, b);
    ::hl_emu::describe_thread(t, b, h->linear);
    char what[384];
    hl_conversion_describe(what, sizeof what, where, from, to, value);
    t.add(": %s", what);
    hl_conversion_record(buf);
}

static inline void hl_emu_shared_declared(const void *array, size_t bytes, const char *name, const char *where) {
    ::hl_emu::shared_declared(array, bytes, name, where);
}

#endif  // HIDET_LANG_EMULATOR_CHECKS_H
