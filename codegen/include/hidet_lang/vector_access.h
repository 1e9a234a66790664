// hidet_lang CUDA primitives: vector accesses of global memory. Included by cuda_primitives.h after its own
// primitives; like it, one body for the GPU and one for the emulator.
//   void hl_copy_vector_4 / _8 / _16(void *dst, const void *src): copies 4, 8 or 16 bytes from src to dst as one
//   access of that width (on the GPU an unsigned / uint2 / uint4 load and store: LDG.E.128 and STG.E.128 for 16
//   bytes between global memory and registers); both addresses must be aligned to the width (the GPU faults
//   otherwise; the emulator's checking mode reports it, hl_emu_copy_vector_checked).
//   int hl_address_aligned(const void *p, int bytes): 1 when p is a multiple of `bytes` (a power of two), else 0.
#pragma once
#ifndef HIDET_LANG_VECTOR_ACCESS_H
#define HIDET_LANG_VECTOR_ACCESS_H

#ifdef HIDET_LANG_EMULATOR
static inline void hl_copy_vector_4(void *dst, const void *src) { memcpy(dst, src, 4); }
static inline void hl_copy_vector_8(void *dst, const void *src) { memcpy(dst, src, 8); }
static inline void hl_copy_vector_16(void *dst, const void *src) { memcpy(dst, src, 16); }
static inline int hl_address_aligned(const void *p, int bytes) { return ((uintptr_t)p & (uintptr_t)(bytes - 1)) == 0; }

// Checking mode's vector copy: a misaligned address, which faults on the GPU, is reported at the DSL line.
static inline void hl_emu_copy_vector_checked(void *dst, const void *src, int bytes, const char *where) {
    if (!hl_address_aligned(dst, bytes) || !hl_address_aligned(src, bytes))
        ::hl_emu::tma_fail(__LINE__, where, "a %d-byte vector copy from %p to %p: both addresses must be %d-byte "
                           "aligned", bytes, src, dst, bytes);
    memcpy(dst, src, (size_t)bytes);
}
#else
static __device__ __forceinline__ void hl_copy_vector_4(void *dst, const void *src) {
    *(unsigned *)dst = *(const unsigned *)src;
}
static __device__ __forceinline__ void hl_copy_vector_8(void *dst, const void *src) {
    *(uint2 *)dst = *(const uint2 *)src;
}
static __device__ __forceinline__ void hl_copy_vector_16(void *dst, const void *src) {
    *(uint4 *)dst = *(const uint4 *)src;
}
static __device__ __forceinline__ int hl_address_aligned(const void *p, int bytes) {
    return ((uintptr_t)p & (uintptr_t)(bytes - 1)) == 0;
}
#endif  // HIDET_LANG_EMULATOR

#endif  // HIDET_LANG_VECTOR_ACCESS_H
