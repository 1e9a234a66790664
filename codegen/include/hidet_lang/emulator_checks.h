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

// Defined in emulator_runtime.cpp.
// An out-of-bounds access of name[index] (`extent` elements) at `where`: the launch fails, the block ends.
[[noreturn]] void fail_access(int flags, const char *name, long long index, long long extent, const char *where);
// The same through a view (`name`) of the tensor `origin_name` (`bytes` bytes), at byte `offset` from its start.
[[noreturn]] void fail_view_access(int flags, const char *name, long long index, const char *origin_name,
                                   long long offset, long long bytes, const char *where);
// The registered shared array of the block `b` that holds `p`, or null.
SharedArray *find_shared(Block *b, const char *p);
// At a shared array's declaration: the first thread of a block to get there registers it, fills it with 0xff
// bytes (NaN for floats; not with `fill` false: a TMA copy registering the dynamic shared memory it lands in, whose
// other bytes, mbarriers among them, may hold what unchecked accesses wrote) and clears its shadow.
void shared_declared(const void *array, size_t bytes, const char *name, const char *where, bool fill = true);
// Checking mode: an access of `size` bytes at `p` (ACCESS_* `flags`), checked for uninitialized reads and races
// when `p` lies in a registered shared array; `op`: the instruction of a bulk access (cp.async, ldmatrix), or null
// for an element access `a[index]`.
void shared_access(const char *p, size_t size, int flags, long long index, const char *where,
                   const char *op = nullptr);

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
// triples (origin: null but for a store through a view). Defined in emulator_runtime.cpp.
__attribute__((noinline, cold)) void fast_store_failed(FastBlock fb, const char *const *sites);

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
