// hidet_lang CUDA emulator: the tensor memory accelerator (PTX cp.async.bulk.tensor), with the GPU's semantics.
//
// A tensor map (hl_tensor_map, 128 bytes like the driver's CUtensorMap) describes a tiled view of a global tensor:
// its rank (2 to 5), element size, extents and byte strides (innermost dimension first, as the driver's are), the
// box a copy moves and the shared-memory swizzle. The host half of a module encodes it before a launch
// (tensor_map_host.h) and passes it by value, as the GPU's `const __grid_constant__ CUtensorMap` parameter.
// - A load copies the box at coordinates c (innermost first) into shared memory at once, densely (the innermost
//   box dimension contiguous) and swizzled as the map says; elements outside the tensor (a coordinate below 0 or
//   at or past its extent) are written as zeros. It then completes the box's bytes (all of them, out-of-bounds
//   parts included, as the GPU counts them) on the mbarrier.
// - A store copies the box from shared memory to the tensor; elements outside the tensor are not written.
// - Swizzle (32, 64, 128 bytes): the 16-byte chunk index of a shared-memory address (bits 4-6) is XORed with its
//   bits 7-9 (1, 2 or 3 of them: CUTLASS's Swizzle<1,4,3>, <2,4,3>, <3,4,3>), on the absolute shared address as
//   the hardware does, so a destination aligned to the pattern's period matches `swizzled_layout`.
// - The destination or source must be 128-byte aligned (1024 for the 128-byte swizzle); the launch fails otherwise,
//   naming the DSL line in checking mode. In checking mode a load marks its shared bytes written, ordered by the
//   mbarrier (not checked for races against the threads' accesses).
// - A multicast load (clusters) makes the same load into every block its mask names, at the destination's and the
//   mbarrier's offsets in each one's dynamic shared memory; a mask naming a block outside the cluster fails.
// The bulk-group commit and wait of stores are no-ops: the copies are synchronous.
// A part of the primitives header's emulator branch (after emulator_mbarrier.h).
#pragma once
#ifndef HIDET_LANG_EMULATOR_TMA_H
#define HIDET_LANG_EMULATOR_TMA_H

#include "tensor_map.h"

namespace hl_emu {

static inline unsigned tma_alignment(int swizzle) { return swizzle == 128 ? 1024u : 128u; }

// The shared address `addr` as the map's swizzle places it.
static inline uintptr_t tma_swizzle(uintptr_t addr, int swizzle) {
    int bits = swizzle == 128 ? 3 : swizzle == 64 ? 2 : swizzle == 32 ? 1 : 0;
    return addr ^ (((addr >> 7) & ((1u << bits) - 1u)) << 4);
}

[[noreturn]] static void tma_fail(int line, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
[[noreturn]] static void tma_fail(int line, const char *where, const char *fmt, ...) {
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

// Visit every element of the box at `coords`: f(shared byte offset before swizzling, global element pointer or
// null outside the tensor).
template <class F>
static inline void tma_for_box(const hl_tensor_map *m, const int *coords, F f) {
    int idx[HL_TENSOR_MAP_MAX_RANK] = {0};
    long long count = 1;
    for (int d = 0; d < m->rank; ++d) count *= m->box[d];
    for (long long k = 0; k < count; ++k) {
        bool inside = true;
        const char *g = (const char *)m->base;
        for (int d = 0; d < m->rank; ++d) {
            long long c = (long long)coords[d] + idx[d];
            inside = inside && c >= 0 && c < m->dims[d];
            g += c * m->strides[d];
        }
        f((size_t)k * (size_t)m->elem_bytes, inside ? g : nullptr);
        for (int d = 0; d < m->rank && ++idx[d] == (int)m->box[d]; ++d) idx[d] = 0;
    }
}

static inline long long tma_box_bytes(const hl_tensor_map *m) {
    long long bytes = m->elem_bytes;
    for (int d = 0; d < m->rank; ++d) bytes *= m->box[d];
    return bytes;
}

// Checking mode: the `bytes` bytes at `p` are written by a load, ordered by the mbarrier the readers wait on
// (`a`: the shared array holding them, or null when it is not registered).
static inline void tma_mark_written(SharedArray *a, const char *p, size_t bytes) {
    if (!a || p < a->base || p + bytes > a->base + a->bytes) return;
    for (size_t k = 0; k < bytes; ++k) {
        Shadow &x = a->shadow[(size_t)(p - a->base) + k];
        x.written = 1, x.write_epoch = 0, x.readers = 0;  // epoch 0: ordered before every access
    }
}

static void tma_load(void *dst, const void *map, void *bar, int rank, const int *coords, int line,
                     const char *where) {
    const hl_tensor_map *m = tma_map(map, rank, dst, line, where, "tma_load");
    uintptr_t base = (uintptr_t)dst;
    int e = m->elem_bytes, swizzle = m->swizzle;
    SharedArray *checked = where ? find_shared(shared_owner(dst), (const char *)dst) : nullptr;
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
static void tma_load_multicast(void *dst, const void *map, void *bar, int mask, int rank, const int *coords,
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

static void tma_store(const void *map, const void *src, int rank, const int *coords, int line, const char *where) {
    const hl_tensor_map *m = tma_map(map, rank, src, line, where, "tma_store");
    uintptr_t base = (uintptr_t)src;
    int e = m->elem_bytes, swizzle = m->swizzle;
    tma_for_box(m, coords, [&](size_t off, const char *g) {
        if (g) memcpy((char *)g, (const char *)tma_swizzle(base + off, swizzle), (size_t)e);
    });
}

}  // namespace hl_emu

#endif  // HIDET_LANG_EMULATOR_TMA_H
