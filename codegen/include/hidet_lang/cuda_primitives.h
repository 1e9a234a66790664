// hidet_lang CUDA primitives: the one header every generated CUDA source includes.
//
// Every warp-collective, atomic and other vendor-specific operation the code generator emits is an `hl_*` call
// declared here, with two bodies:
// - GPU (NVRTC; HIDET_LANG_EMULATOR not defined): CUDA intrinsics. Only NVRTC's built-in headers and the CUDA
//   runtime's cuda_fp16.h / cuda_bf16.h are used (NVRTC has no <stdint.h>: the fixed-width integer types are
//   defined here).
// - Emulator (HIDET_LANG_EMULATOR defined; C++17 by the system compiler): cuda_emulator.h, which also supplies
//   CUDA's built-in variables, __shared__, __syncthreads, half types, math functions and the launch runtime.
//
// Primitives (T: int32_t uint32_t int64_t uint64_t float double, shuffles also half and __nv_bfloat16):
//   T hl_shfl_sync(unsigned mask, T v, int src_lane, int width = 32)   and _up (delta), _down (delta),
//   _xor (lane_mask): CUDA's __shfl_*_sync semantics, width sub-groups, out-of-range lanes keep their value.
//   unsigned hl_ballot_sync(unsigned mask, int pred); int hl_any_sync(mask, pred); int hl_all_sync(mask, pred);
//   void hl_syncwarp(unsigned mask);
//   T hl_atomic_add(T *addr, T v), hl_atomic_sub (integers and floats), hl_atomic_min, hl_atomic_max
//   (integers), hl_atomic_exchange (all T), hl_atomic_cas(T *addr, T compare, T v) (integers): each returns the
//   old value;
//   char *hl_dynamic_smem(): the block's dynamic shared memory (16-byte aligned);
//   T hl_div_<t>(T a, T b), hl_mod_<t>: integer `/` and `%` with defined results for a zero divisor and MIN / -1
//   (int_division.h; the same on every target);
//   T hl_cvt_<f>_<i>(F x): a float converted to an integer type, rounded toward zero, saturating, NaN -> 0
//   (float_to_int.h: cvt.rzi on the GPU, the same results on every target);
//   void hl_assert_fail(int line): records the first failed assertion's line in `hl_assert_line` (a __device__
//   int on the GPU; the emulator's hl_emu_take_assert_line() returns and clears it); the caller then returns.
// Tensor-core and asynchronous-copy primitives (GPU: inline PTX, sm_80 and later; on an older architecture the
// body is a trap). The emulator's bodies give the GPU's results with the same fragment layouts:
//   void hl_mma_m16n8k16_f16_f32(const uint32_t *a, const uint32_t *b, float *c): PTX
//   mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 with D = C (in place): c += A (16x16) @ B (16x8). Lane l
//   (g = l >> 2, t = l & 3) holds a[0..3] = A[g][2t..2t+1], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..] (two
//   halves a register, the lower column in bits 0-15), b[0..1] = B[2t..2t+1][g], B[2t+8..2t+9][g] (the lower row
//   in bits 0-15), c[0..3] = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]. Warp-collective (all 32 lanes).
//   The emulator accumulates in f32: C plus the 16 exact f16 products in k order.
//   void hl_ldmatrix_x4(uint32_t *dst, const void *row): PTX ldmatrix.sync.aligned.m8n8.x4.shared.b16. Lane l
//   gives the shared-memory address of row (l & 7) of 8x8 b16 matrix (l >> 3) (16 bytes, 16-byte aligned);
//   dst[i] receives elements 2t, 2t+1 of row g of matrix i. Warp-collective (all 32 lanes).
//   void hl_mma_m16n8k16_bf16_f32(const uint32_t *a, const uint32_t *b, float *c): the same with bf16 inputs
//   (mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32), same fragment layouts.
//   void hl_ldmatrix_x4_trans(uint32_t *dst, const void *row): ldmatrix...x4.trans.shared.b16: the same rows,
//   each matrix transposed: dst[i] receives element g of rows 2t and 2t+1 of matrix i (bits 0-15 and 16-31), so
//   a row-major k x n tile of B gives the b fragment of mma m16n8k16.
//   void hl_mma_m16n8k8_tf32_f32(const uint32_t *a, const uint32_t *b, float *c): PTX
//   mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, c += A (16x8) @ B (8x8), one 32-bit tf32 a register:
//   a[0..3] = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4], b[0..1] = B[t][g], B[t+4][g], c as for m16n8k16. The
//   GPU reads each operand's sign, exponent and upper 10 mantissa bits (the lower 13 are dropped: truncation);
//   the emulator does the same and accumulates in f32 in k order (the products of tf32s are exact in f32).
//   float hl_cvt_rna_tf32_f32(float x): PTX cvt.rna.tf32.f32: x rounded to tf32 (nearest, ties away from zero),
//   as an f32 whose lower 13 mantissa bits are zero; NaN and infinity kept.
//   void hl_cp_async_4 / _8 / _16(void *dst_shared, const void *src_global): cp.async.ca (4, 8 bytes) or
//   cp.async.cg (16 bytes) .shared.global; hl_cp_async_commit_group(); hl_cp_async_wait_group<N>();
//   hl_cp_async_wait_all(). The emulator copies synchronously (the data is in place when cp_async returns), so
//   commit and wait are no-ops there: a correct emulation, since the GPU only promises the data after the wait.
//   A kernel that reads the destination before waiting is wrong on the GPU yet works on the emulator.
// Hopper: mbarrier and TMA (GPU: inline PTX, sm_90 and later; a trap below. Emulator: emulator_mbarrier.h and
// emulator_tma.h, with the GPU's phases, transaction counts, boxes, swizzles and zero fill):
//   void hl_mbarrier_init(uint64_t *bar, int count); uint64_t hl_mbarrier_arrive(uint64_t *bar) (the state before
//   the arrival); uint64_t hl_mbarrier_arrive_expect_tx(uint64_t *bar, int bytes); void hl_mbarrier_expect_tx(bar,
//   bytes); int hl_mbarrier_try_wait_parity(uint64_t *bar, int parity) (1 once the phase of that parity has
//   completed); void hl_mbarrier_wait_parity(bar, parity) (a try_wait loop); hl_fence_mbarrier_init() (PTX
//   fence.mbarrier_init.release.cluster); hl_fence_proxy_async_shared() (fence.proxy.async.shared::cta: the
//   threads' shared-memory writes become visible to TMA stores).
//   void hl_tma_load_<R>d(void *dst_shared, const void *map, uint64_t *bar, int c0, ..., int c<R-1>) (R = 2..5;
//   coordinates innermost first): cp.async.bulk.tensor.<R>d.shared::cluster.global.tile.mbarrier::complete_tx::bytes;
//   void hl_tma_store_<R>d(const void *map, const void *src_shared, int c0, ...): cp.async.bulk.tensor
//   .global.shared::cta.tile.bulk_group; hl_tma_store_commit_group(); hl_tma_store_wait_group<N>()
//   (cp.async.bulk.wait_group.read N). `map`: the address of a tensor-map kernel parameter (tensor_map.h).
// Hopper: thread block clusters (ranks, the cluster barrier, mapa, remote mbarrier arrivals, TMA multicast):
// hopper_cluster.h, included at the end with both bodies.
// Emulator builds only (see cuda_emulator.h): hl_emu_store_guard, hl_emu_checked (and their _in variants for
// views, checked against the memory viewed), hl_emu_shared_declared, hl_emu_dynamic_shared,
// hl_emu_division_by_zero and hl_emu_conversion_warning for guarded and checked accesses and operations
// (emulator_checks.h), and the launch API
// (emulator_launch.h) hl_emu_launch / hl_emu_launch_blocks (with a block function: the fast path of a barrier-free
// kernel; and the kernel's local-array bytes, for its threads' stacks) / hl_emu_error_message /
// hl_emu_take_assert_line.
#pragma once
#ifndef HIDET_LANG_CUDA_PRIMITIVES_H
#define HIDET_LANG_CUDA_PRIMITIVES_H

#ifdef HIDET_LANG_EMULATOR
// ============================================================================================================
// Emulator bodies. The warp operations are macros so that the call site's line identifies the operation in
// deadlock and divergence reports.
#include "cuda_emulator.h"
#include "int_division.h"
#include "float_to_int.h"

#define hl_shfl_sync(...) ::hl_emu::shfl(__LINE__, ::hl_emu::W_IDX, __VA_ARGS__)
#define hl_shfl_up_sync(...) ::hl_emu::shfl(__LINE__, ::hl_emu::W_UP, __VA_ARGS__)
#define hl_shfl_down_sync(...) ::hl_emu::shfl(__LINE__, ::hl_emu::W_DOWN, __VA_ARGS__)
#define hl_shfl_xor_sync(...) ::hl_emu::shfl(__LINE__, ::hl_emu::W_XOR, __VA_ARGS__)
#define hl_ballot_sync(mask, pred) ::hl_emu::vote(__LINE__, ::hl_emu::W_BALLOT, (mask), (pred))
#define hl_any_sync(mask, pred) ((int)::hl_emu::vote(__LINE__, ::hl_emu::W_ANY, (mask), (pred)))
#define hl_all_sync(mask, pred) ((int)::hl_emu::vote(__LINE__, ::hl_emu::W_ALL, (mask), (pred)))
#define hl_syncwarp(mask) ::hl_emu::syncwarp(__LINE__, (mask))

#define hl_atomic_add ::hl_emu::atomic_add
#define hl_atomic_sub ::hl_emu::atomic_sub
#define hl_atomic_min ::hl_emu::atomic_min
#define hl_atomic_max ::hl_emu::atomic_max
#define hl_atomic_exchange ::hl_emu::atomic_exchange
#define hl_atomic_cas ::hl_emu::atomic_cas

#define hl_mma_m16n8k16_f16_f32(a, b, c) ::hl_emu::mma_m16n8k16_f16_f32(__LINE__, (a), (b), (c))
#define hl_ldmatrix_x4(dst, row) ::hl_emu::ldmatrix_x4(__LINE__, (dst), (row))
#define hl_mma_m16n8k16_bf16_f32(a, b, c) ::hl_emu::mma_m16n8k16_bf16_f32(__LINE__, (a), (b), (c))
#define hl_ldmatrix_x4_trans(dst, row) ::hl_emu::ldmatrix_x4_trans(__LINE__, (dst), (row))
#define hl_mma_m16n8k8_tf32_f32(a, b, c) ::hl_emu::mma_m16n8k8_tf32_f32(__LINE__, (a), (b), (c))
#define hl_cvt_rna_tf32_f32 ::hl_emu::cvt_rna_tf32_f32
static inline void hl_cp_async_4(void *dst, const void *src) { memcpy(dst, src, 4); }
static inline void hl_cp_async_8(void *dst, const void *src) { memcpy(dst, src, 8); }
static inline void hl_cp_async_16(void *dst, const void *src) { memcpy(dst, src, 16); }
static inline void hl_cp_async_commit_group(void) {}
template <int N>
static inline void hl_cp_async_wait_group(void) {}
static inline void hl_cp_async_wait_all(void) {}

static inline char *hl_dynamic_smem(void) { return ::hl_emu::hdr()->st->dyn_smem; }
static inline void hl_assert_fail(int line) { ::hl_emu::assert_fail(line); }

// ---- Hopper: mbarrier and TMA (emulator) --------------------------------------------------------------------
#include "emulator_mbarrier.h"
#include "emulator_tma.h"
#define __grid_constant__
#define hl_mbarrier_init(bar, count) ::hl_emu::mbar_init((bar), (count), __LINE__, nullptr)
#define hl_mbarrier_arrive(bar) ::hl_emu::mbar_arrive((bar), 0, __LINE__, nullptr)
#define hl_mbarrier_arrive_expect_tx(bar, bytes) ::hl_emu::mbar_arrive((bar), (bytes), __LINE__, nullptr)
#define hl_mbarrier_expect_tx(bar, bytes) ::hl_emu::mbar_expect_tx((bar), (bytes), __LINE__, nullptr)
#define hl_mbarrier_try_wait_parity(bar, parity) ::hl_emu::mbar_wait((bar), (parity), __LINE__, nullptr)
#define hl_mbarrier_wait_parity(bar, parity) ((void)::hl_emu::mbar_wait((bar), (parity), __LINE__, nullptr))
// checking mode: the same, naming the DSL line `where`
#define hl_emu_mbarrier_init(where, bar, count) ::hl_emu::mbar_init((bar), (count), __LINE__, (where))
#define hl_emu_mbarrier_arrive(where, bar) ::hl_emu::mbar_arrive((bar), 0, __LINE__, (where))
#define hl_emu_mbarrier_arrive_expect_tx(where, bar, bytes) ::hl_emu::mbar_arrive((bar), (bytes), __LINE__, (where))
#define hl_emu_mbarrier_expect_tx(where, bar, bytes) ::hl_emu::mbar_expect_tx((bar), (bytes), __LINE__, (where))
#define hl_emu_mbarrier_try_wait_parity(where, bar, parity) ::hl_emu::mbar_wait((bar), (parity), __LINE__, (where))
#define hl_emu_mbarrier_wait_parity(where, bar, parity) \
    ((void)::hl_emu::mbar_wait((bar), (parity), __LINE__, (where)))
static inline void hl_fence_mbarrier_init(void) {}
static inline void hl_fence_proxy_async_shared(void) {}
static inline void hl_tma_store_commit_group(void) {}
template <int N>
static inline void hl_tma_store_wait_group(void) {}
#define HL_EMU_TMA(R, PARAMS, COORDS)                                                                        \
    static inline void hl_emu_tma_load_##R##d##_at(int line, const char *where, void *dst, const void *map,  \
                                                   uint64_t *bar, PARAMS) {                                      \
        int c[R] = {COORDS};                                                                                \
        ::hl_emu::tma_load(dst, map, bar, R, c, line, where);                                               \
    }                                                                                                       \
    static inline void hl_emu_tma_store_##R##d##_at(int line, const char *where, const void *map,          \
                                                    const void *src, PARAMS) {                                                    \
        int c[R] = {COORDS};                                                                                \
        ::hl_emu::tma_store(map, src, R, c, line, where);                                                   \
    }
#define HL_COMMA ,
HL_EMU_TMA(2, int c0 HL_COMMA int c1, c0 HL_COMMA c1)
HL_EMU_TMA(3, int c0 HL_COMMA int c1 HL_COMMA int c2, c0 HL_COMMA c1 HL_COMMA c2)
HL_EMU_TMA(4, int c0 HL_COMMA int c1 HL_COMMA int c2 HL_COMMA int c3, c0 HL_COMMA c1 HL_COMMA c2 HL_COMMA c3)
HL_EMU_TMA(5, int c0 HL_COMMA int c1 HL_COMMA int c2 HL_COMMA int c3 HL_COMMA int c4,
           c0 HL_COMMA c1 HL_COMMA c2 HL_COMMA c3 HL_COMMA c4)
#undef HL_COMMA
#undef HL_EMU_TMA
#define hl_tma_load_2d(...) hl_emu_tma_load_2d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_tma_load_3d(...) hl_emu_tma_load_3d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_tma_load_4d(...) hl_emu_tma_load_4d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_tma_load_5d(...) hl_emu_tma_load_5d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_tma_store_2d(...) hl_emu_tma_store_2d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_tma_store_3d(...) hl_emu_tma_store_3d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_tma_store_4d(...) hl_emu_tma_store_4d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_tma_store_5d(...) hl_emu_tma_store_5d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_emu_tma_load_2d(where, ...) hl_emu_tma_load_2d_at(__LINE__, (where), __VA_ARGS__)
#define hl_emu_tma_load_3d(where, ...) hl_emu_tma_load_3d_at(__LINE__, (where), __VA_ARGS__)
#define hl_emu_tma_load_4d(where, ...) hl_emu_tma_load_4d_at(__LINE__, (where), __VA_ARGS__)
#define hl_emu_tma_load_5d(where, ...) hl_emu_tma_load_5d_at(__LINE__, (where), __VA_ARGS__)
#define hl_emu_tma_store_2d(where, ...) hl_emu_tma_store_2d_at(__LINE__, (where), __VA_ARGS__)
#define hl_emu_tma_store_3d(where, ...) hl_emu_tma_store_3d_at(__LINE__, (where), __VA_ARGS__)
#define hl_emu_tma_store_4d(where, ...) hl_emu_tma_store_4d_at(__LINE__, (where), __VA_ARGS__)
#define hl_emu_tma_store_5d(where, ...) hl_emu_tma_store_5d_at(__LINE__, (where), __VA_ARGS__)
// ---- end of Hopper: mbarrier and TMA (emulator) ---------------------------------------------------------------

#else
// ============================================================================================================
// GPU bodies (NVRTC)
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
#if defined(_WIN32)
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
typedef long int64_t;  // as glibc defines them, so that overloads match the emulator's
typedef unsigned long uint64_t;
#endif
typedef int64_t intptr_t;
typedef uint64_t uintptr_t;
#ifndef INT8_MIN
#define INT8_MIN (-128)
#define INT16_MIN (-32767 - 1)
#define INT32_MIN (-2147483647 - 1)
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT8_MAX 127
#define INT16_MAX 32767
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807LL
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615ULL
#endif
#else
#include <stdint.h>
#endif
#include "int_division.h"
#include "float_to_int.h"

#define HL_DEVICE static __device__ __forceinline__

#define HL_SHFL(T)                                                                                         \
    HL_DEVICE T hl_shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {                            \
        return __shfl_sync(mask, v, src_lane, width);                                                      \
    }                                                                                                      \
    HL_DEVICE T hl_shfl_up_sync(unsigned mask, T v, int delta, int width = 32) {                            \
        return __shfl_up_sync(mask, v, (unsigned)delta, width);                                            \
    }                                                                                                      \
    HL_DEVICE T hl_shfl_down_sync(unsigned mask, T v, int delta, int width = 32) {                          \
        return __shfl_down_sync(mask, v, (unsigned)delta, width);                                          \
    }                                                                                                      \
    HL_DEVICE T hl_shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {                       \
        return __shfl_xor_sync(mask, v, lane_mask, width);                                                 \
    }
HL_SHFL(int)
HL_SHFL(unsigned int)
HL_SHFL(long)
HL_SHFL(unsigned long)
HL_SHFL(long long)
HL_SHFL(unsigned long long)
HL_SHFL(float)
HL_SHFL(double)
HL_SHFL(__half)
HL_SHFL(__nv_bfloat16)
#undef HL_SHFL

HL_DEVICE unsigned hl_ballot_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred); }
HL_DEVICE int hl_any_sync(unsigned mask, int pred) { return __any_sync(mask, pred); }
HL_DEVICE int hl_all_sync(unsigned mask, int pred) { return __all_sync(mask, pred); }
HL_DEVICE void hl_syncwarp(unsigned mask) { __syncwarp(mask); }

// Atomics: CUDA has no 64-bit signed atomicAdd / atomicExch / atomicCAS, so those go through the unsigned long
// long overloads (two's complement makes them equivalent); `long` (int64_t on LP64) is cast likewise.
typedef unsigned long long hl_u64;

HL_DEVICE int hl_atomic_add(int *p, int v) { return atomicAdd(p, v); }
HL_DEVICE unsigned int hl_atomic_add(unsigned int *p, unsigned int v) { return atomicAdd(p, v); }
HL_DEVICE long hl_atomic_add(long *p, long v) { return (long)atomicAdd((hl_u64 *)p, (hl_u64)v); }
HL_DEVICE unsigned long hl_atomic_add(unsigned long *p, unsigned long v) {
    return (unsigned long)atomicAdd((hl_u64 *)p, (hl_u64)v);
}
HL_DEVICE long long hl_atomic_add(long long *p, long long v) { return (long long)atomicAdd((hl_u64 *)p, (hl_u64)v); }
HL_DEVICE hl_u64 hl_atomic_add(hl_u64 *p, hl_u64 v) { return atomicAdd(p, v); }
HL_DEVICE float hl_atomic_add(float *p, float v) { return atomicAdd(p, v); }
HL_DEVICE double hl_atomic_add(double *p, double v) { return atomicAdd(p, v); }

HL_DEVICE int hl_atomic_sub(int *p, int v) { return atomicSub(p, v); }
HL_DEVICE unsigned int hl_atomic_sub(unsigned int *p, unsigned int v) { return atomicSub(p, v); }
HL_DEVICE long hl_atomic_sub(long *p, long v) { return (long)atomicAdd((hl_u64 *)p, 0ull - (hl_u64)v); }
HL_DEVICE unsigned long hl_atomic_sub(unsigned long *p, unsigned long v) {
    return (unsigned long)atomicAdd((hl_u64 *)p, 0ull - (hl_u64)v);
}
HL_DEVICE long long hl_atomic_sub(long long *p, long long v) {
    return (long long)atomicAdd((hl_u64 *)p, 0ull - (hl_u64)v);
}
HL_DEVICE hl_u64 hl_atomic_sub(hl_u64 *p, hl_u64 v) { return atomicAdd(p, 0ull - v); }
HL_DEVICE float hl_atomic_sub(float *p, float v) { return atomicAdd(p, -v); }
HL_DEVICE double hl_atomic_sub(double *p, double v) { return atomicAdd(p, -v); }

// atomicMin / atomicMax over the integer types (long and unsigned long through their 64-bit twins)
#define HL_ATOMIC_MINMAX(NAME, FN)                                                                             \
    HL_DEVICE int NAME(int *p, int v) { return FN(p, v); }                                                   \
    HL_DEVICE unsigned int NAME(unsigned int *p, unsigned int v) { return FN(p, v); }                        \
    HL_DEVICE long NAME(long *p, long v) { return (long)FN((long long *)p, (long long)v); }                  \
    HL_DEVICE unsigned long NAME(unsigned long *p, unsigned long v) {                                        \
        return (unsigned long)FN((hl_u64 *)p, (hl_u64)v);                                                    \
    }                                                                                                        \
    HL_DEVICE long long NAME(long long *p, long long v) { return FN(p, v); }                                 \
    HL_DEVICE hl_u64 NAME(hl_u64 *p, hl_u64 v) { return FN(p, v); }
HL_ATOMIC_MINMAX(hl_atomic_min, atomicMin)
HL_ATOMIC_MINMAX(hl_atomic_max, atomicMax)
#undef HL_ATOMIC_MINMAX

HL_DEVICE int hl_atomic_exchange(int *p, int v) { return atomicExch(p, v); }
HL_DEVICE unsigned int hl_atomic_exchange(unsigned int *p, unsigned int v) { return atomicExch(p, v); }
HL_DEVICE long hl_atomic_exchange(long *p, long v) { return (long)atomicExch((hl_u64 *)p, (hl_u64)v); }
HL_DEVICE unsigned long hl_atomic_exchange(unsigned long *p, unsigned long v) {
    return (unsigned long)atomicExch((hl_u64 *)p, (hl_u64)v);
}
HL_DEVICE long long hl_atomic_exchange(long long *p, long long v) {
    return (long long)atomicExch((hl_u64 *)p, (hl_u64)v);
}
HL_DEVICE hl_u64 hl_atomic_exchange(hl_u64 *p, hl_u64 v) { return atomicExch(p, v); }
HL_DEVICE float hl_atomic_exchange(float *p, float v) { return atomicExch(p, v); }
HL_DEVICE double hl_atomic_exchange(double *p, double v) {
    return __longlong_as_double((long long)atomicExch((hl_u64 *)p, (hl_u64)__double_as_longlong(v)));
}

HL_DEVICE int hl_atomic_cas(int *p, int compare, int v) { return atomicCAS(p, compare, v); }
HL_DEVICE unsigned int hl_atomic_cas(unsigned int *p, unsigned int compare, unsigned int v) {
    return atomicCAS(p, compare, v);
}
HL_DEVICE long hl_atomic_cas(long *p, long compare, long v) {
    return (long)atomicCAS((hl_u64 *)p, (hl_u64)compare, (hl_u64)v);
}
HL_DEVICE unsigned long hl_atomic_cas(unsigned long *p, unsigned long compare, unsigned long v) {
    return (unsigned long)atomicCAS((hl_u64 *)p, (hl_u64)compare, (hl_u64)v);
}
HL_DEVICE long long hl_atomic_cas(long long *p, long long compare, long long v) {
    return (long long)atomicCAS((hl_u64 *)p, (hl_u64)compare, (hl_u64)v);
}
HL_DEVICE hl_u64 hl_atomic_cas(hl_u64 *p, hl_u64 compare, hl_u64 v) { return atomicCAS(p, compare, v); }

// Tensor cores and asynchronous copies (see the top of this file): sm_80 and later.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define HL_SM80 1
#else
#define HL_SM80 0
#endif

HL_DEVICE void hl_mma_m16n8k16_f16_f32(const uint32_t *a, const uint32_t *b, float *c) {
#if HL_SM80
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();
#endif
}

HL_DEVICE void hl_mma_m16n8k8_tf32_f32(const uint32_t *a, const uint32_t *b, float *c) {
#if HL_SM80
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();
#endif
}

HL_DEVICE float hl_cvt_rna_tf32_f32(float x) {
#if HL_SM80
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return __uint_as_float(r);
#else
    __trap();
    return x;
#endif
}

HL_DEVICE void hl_ldmatrix_x4(uint32_t *dst, const void *row) {
#if HL_SM80
    unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(dst[0]), "=r"(dst[1]), "=r"(dst[2]), "=r"(dst[3])
                 : "r"(addr)
                 : "memory");
#else
    __trap();
#endif
}

HL_DEVICE void hl_mma_m16n8k16_bf16_f32(const uint32_t *a, const uint32_t *b, float *c) {
#if HL_SM80
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();
#endif
}

HL_DEVICE void hl_ldmatrix_x4_trans(uint32_t *dst, const void *row) {
#if HL_SM80
    unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(dst[0]), "=r"(dst[1]), "=r"(dst[2]), "=r"(dst[3])
                 : "r"(addr)
                 : "memory");
#else
    __trap();
#endif
}

#if HL_SM80
#define HL_CP_ASYNC(N, CACHE)                                                                              \
    HL_DEVICE void hl_cp_async_##N(void *dst, const void *src) {                                           \
        unsigned d = (unsigned)__cvta_generic_to_shared(dst);                                              \
        asm volatile("cp.async." CACHE ".shared.global [%0], [%1], " #N ";\n" ::"r"(d), "l"(src) : "memory"); \
    }
#else
#define HL_CP_ASYNC(N, CACHE) \
    HL_DEVICE void hl_cp_async_##N(void *dst, const void *src) { __trap(); }
#endif
HL_CP_ASYNC(4, "ca")
HL_CP_ASYNC(8, "ca")
HL_CP_ASYNC(16, "cg")
#undef HL_CP_ASYNC

HL_DEVICE void hl_cp_async_commit_group(void) {
#if HL_SM80
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
HL_DEVICE void hl_cp_async_wait_group(void) {
#if HL_SM80
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

HL_DEVICE void hl_cp_async_wait_all(void) {
#if HL_SM80
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}
#undef HL_SM80

extern __shared__ __align__(16) char hl_dynamic_smem_base[];
HL_DEVICE char *hl_dynamic_smem(void) { return hl_dynamic_smem_base; }

// The first failed device assertion's line (0: none); the host reads and clears it after a launch.
__device__ int hl_assert_line = 0;
HL_DEVICE void hl_assert_fail(int line) { atomicCAS(&hl_assert_line, 0, line); }

// ---- Hopper: mbarrier and TMA (GPU) -------------------------------------------------------------------------
#include "tensor_map.h"
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define HL_SM90 1
#else
#define HL_SM90 0
#endif
#define HL_SMEM(p) ((unsigned)__cvta_generic_to_shared(p))

HL_DEVICE void hl_mbarrier_init(uint64_t *bar, int count) {
#if HL_SM90
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(HL_SMEM(bar)), "r"(count) : "memory");
#else
    __trap();
#endif
}

HL_DEVICE uint64_t hl_mbarrier_arrive(uint64_t *bar) {
    uint64_t state = 0;
#if HL_SM90
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];\n" : "=l"(state) : "r"(HL_SMEM(bar)) : "memory");
#else
    __trap();
#endif
    return state;
}

HL_DEVICE uint64_t hl_mbarrier_arrive_expect_tx(uint64_t *bar, int bytes) {
    uint64_t state = 0;
#if HL_SM90
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;\n"
                 : "=l"(state)
                 : "r"(HL_SMEM(bar)), "r"(bytes)
                 : "memory");
#else
    __trap();
#endif
    return state;
}

HL_DEVICE void hl_mbarrier_expect_tx(uint64_t *bar, int bytes) {
#if HL_SM90
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(HL_SMEM(bar)), "r"(bytes)
                 : "memory");
#else
    __trap();
#endif
}

HL_DEVICE int hl_mbarrier_try_wait_parity(uint64_t *bar, int parity) {
    unsigned done = 0;
#if HL_SM90
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(HL_SMEM(bar)), "r"(parity)
        : "memory");
#else
    __trap();
#endif
    return (int)done;
}

HL_DEVICE void hl_mbarrier_wait_parity(uint64_t *bar, int parity) {
    while (!hl_mbarrier_try_wait_parity(bar, parity)) {
    }
}

HL_DEVICE void hl_fence_mbarrier_init(void) {
#if HL_SM90
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

HL_DEVICE void hl_fence_proxy_async_shared(void) {
#if HL_SM90
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

#if HL_SM90
#define HL_TMA(R, PARAMS, COORDS, OPERANDS)                                                                    \
    HL_DEVICE void hl_tma_load_##R##d(void *dst, const void *map, uint64_t *bar, PARAMS) {                     \
        asm volatile("cp.async.bulk.tensor." #R "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"     \
                     " [%0], [%1, {" COORDS "}], [%2];\n" ::"r"(HL_SMEM(dst)),                                 \
                     "l"(map), "r"(HL_SMEM(bar)), OPERANDS                                                     \
                     : "memory");                                                                              \
    }                                                                                                          \
    HL_DEVICE void hl_tma_store_##R##d(const void *map, const void *src, PARAMS) {                             \
        asm volatile("cp.async.bulk.tensor." #R "d.global.shared::cta.tile.bulk_group [%1, {" COORDS "}], [%0];\n" \
                     ::"r"(HL_SMEM(src)), "l"(map), "r"(0), OPERANDS                                           \
                     : "memory");                                                                              \
    }
#else
#define HL_TMA(R, PARAMS, COORDS, OPERANDS)                                                                    \
    HL_DEVICE void hl_tma_load_##R##d(void *dst, const void *map, uint64_t *bar, PARAMS) { __trap(); }         \
    HL_DEVICE void hl_tma_store_##R##d(const void *map, const void *src, PARAMS) { __trap(); }
#endif
#define HL_COMMA ,
HL_TMA(2, int c0 HL_COMMA int c1, "%3, %4", "r"(c0) HL_COMMA "r"(c1))
HL_TMA(3, int c0 HL_COMMA int c1 HL_COMMA int c2, "%3, %4, %5", "r"(c0) HL_COMMA "r"(c1) HL_COMMA "r"(c2))
HL_TMA(4, int c0 HL_COMMA int c1 HL_COMMA int c2 HL_COMMA int c3, "%3, %4, %5, %6",
       "r"(c0) HL_COMMA "r"(c1) HL_COMMA "r"(c2) HL_COMMA "r"(c3))
HL_TMA(5, int c0 HL_COMMA int c1 HL_COMMA int c2 HL_COMMA int c3 HL_COMMA int c4, "%3, %4, %5, %6, %7",
       "r"(c0) HL_COMMA "r"(c1) HL_COMMA "r"(c2) HL_COMMA "r"(c3) HL_COMMA "r"(c4))
#undef HL_COMMA
#undef HL_TMA

HL_DEVICE void hl_tma_store_commit_group(void) {
#if HL_SM90
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

template <int N>
HL_DEVICE void hl_tma_store_wait_group(void) {
#if HL_SM90
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}
#undef HL_SMEM
#undef HL_SM90
// ---- end of Hopper: mbarrier and TMA (GPU) ----------------------------------------------------------------

// 2^x by the special function unit alone (`ex2.approx.ftz`): the exp2 of a fast-math function
HL_DEVICE float hl_ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

#undef HL_DEVICE
#endif  // HIDET_LANG_EMULATOR

// Hopper: warpgroup MMA and register reallocation (both bodies)
#include "hopper_wgmma.h"
// Hopper: thread block clusters (both bodies)
#include "hopper_cluster.h"
// Vector accesses of global memory (both bodies)
#include "vector_access.h"

#endif  // HIDET_LANG_CUDA_PRIMITIVES_H
