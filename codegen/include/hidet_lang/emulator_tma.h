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
// A part of the primitives header's emulator branch (after emulator_mbarrier.h); its out-of-line parts are in
// emulator_runtime.cpp.
#pragma once
#ifndef HIDET_LANG_EMULATOR_TMA_H
#define HIDET_LANG_EMULATOR_TMA_H

#include "tensor_map.h"

#pragma GCC visibility push(hidden)  // the runtime's, as in cuda_emulator.h
namespace hl_emu {

static inline unsigned tma_alignment(int swizzle) { return swizzle == 128 ? 1024u : 128u; }

// The shared address `addr` as the map's swizzle places it.
static inline uintptr_t tma_swizzle(uintptr_t addr, int swizzle) {
    int bits = swizzle == 128 ? 3 : swizzle == 64 ? 2 : swizzle == 32 ? 1 : 0;
    return addr ^ (((addr >> 7) & ((1u << bits) - 1u)) << 4);
}

// Visit every element of the box at `coords`: f(shared byte offset before swizzling, global element pointer or
// null outside the tensor).
// Defined in emulator_runtime.cpp: fail the launch at the DSL location `where` (or the generated line `line`),
// naming the thread (vector_access.h's checked copies fail through it too); a load of the box at `coords` (rank `rank`) into `dst`, completing its bytes
// on the mbarrier `bar`; the same into every block of the cluster that `mask` names; a store of the box from `src`.
[[noreturn]] void tma_fail(int line, const char *where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void tma_load(void *dst, const void *map, void *bar, int rank, const int *coords, int line, const char *where);
void tma_load_multicast(void *dst, const void *map, void *bar, int mask, int rank, const int *coords, int line,
                        const char *where);
void tma_store(const void *map, const void *src, int rank, const int *coords, int line, const char *where);

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

}  // namespace hl_emu
#pragma GCC visibility pop

#endif  // HIDET_LANG_EMULATOR_TMA_H
