// hidet_lang CUDA primitives: Hopper's warpgroup MMA (wgmma) and warpgroup register reallocation (sm_90a).
// Included by cuda_primitives.h after its own primitives; like it, one body for the GPU (inline PTX) and one for
// the emulator (emulator_wgmma.h).
//
// A warpgroup is 4 consecutive warps (128 threads, the first a multiple of 128). Thread t of a warpgroup is in
// warp w = t / 32 as lane l, with g = l / 4 and q = l % 4.
//   uint64_t hl_wgmma_make_desc(const void *tile, int byte_offset, int lbo, int sbo, int swizzle_bytes): the
//   matrix descriptor of the operand starting `byte_offset` bytes into the shared-memory tile `tile` (the tile's
//   start must be aligned to the swizzle atom: 8 rows of `swizzle_bytes`), with leading / stride byte offsets
//   `lbo` / `sbo` (multiples of 16, below 2^18) and swizzle 0 (none), 32, 64 or 128 bytes: bits 0-13 the start
//   address / 16, 16-29 lbo / 16, 32-45 sbo / 16, 49-51 the base offset (0), 62-63 the mode (1: 128B, 2: 64B,
//   3: 32B). The emulator keeps the address bits the swizzle reads (4-9) and the offset fields as the GPU does;
//   the rest of its start address is relative to an anchor it names in bits 52-61, which the GPU ignores.
//   void hl_wgmma_ss_f16<N, TA, TB>(uint64_t desc_a, uint64_t desc_b, float *d, int scale_d), _bf16: PTX
//   wgmma.mma_async.sync.aligned.m64n<N>k16.f32.<t>.<t> (N a multiple of 8 from 8 to 256): D (64xN, f32) =
//   A (64x16) @ B (16xN) + (scale_d ? D : 0), A and B in shared memory through their descriptors, TA / TB the
//   transpose bits (0: K-major, 1: MN-major). Thread t holds d[r] = D[16w + g + 8 ((r >> 1) & 1)][8 (r >> 2) +
//   2q + (r & 1)] for r < N / 2.
//   void hl_wgmma_rs_f16<N, TB>(const uint32_t *a, uint64_t desc_b, float *d, int scale_d), _bf16: the same
//   with A from registers: a[i] holds A[16w + g + 8 (i & 1)][2q + 8 (i >> 1) + {0, 1}] (the lower column in
//   bits 0-15), as mma.m16n8k16's A fragment of warp w's 16 rows.
//   void hl_wgmma_fence(), hl_wgmma_commit_group(), hl_wgmma_wait_group<N>(): wgmma.fence (orders this thread's
//   register accesses before the following mma_async), wgmma.commit_group (closes the group of this thread's
//   mma_async since the last commit), wgmma.wait_group N (waits until at most N committed groups are pending).
//   void hl_wgmma_wait_group_registers<G, N>(float *d): wgmma.wait_group G, then the N / 2 accumulators d tied to
//   it (an empty asm that reads and writes each), so that the compiler moves no read of them above the wait.
//   void hl_setmaxnreg_inc<R>(), hl_setmaxnreg_dec<R>(): setmaxnreg.inc / .dec.sync.aligned.u32 R (24 to 256,
//   a multiple of 8): the warpgroup's threads' register budget raised / lowered to R; a no-op on the emulator.
// On the GPU every body but the descriptor's needs sm_90a (elsewhere it traps). The emulator computes an
// mma_async when a wait_group covers it, reading shared memory through the descriptor as the GPU does; see
// emulator_wgmma.h for what it reports.
#pragma once
#ifndef HIDET_LANG_HOPPER_WGMMA_H
#define HIDET_LANG_HOPPER_WGMMA_H

#ifdef HIDET_LANG_EMULATOR
// ============================================================================================================
// Emulator bodies: the call site's line identifies the operation in reports.
#include "emulator_wgmma.h"

#define hl_wgmma_make_desc(...) ::hl_emu::wgmma_make_desc(__LINE__, __VA_ARGS__)
#define hl_wgmma_ss_f16 ::hl_emu::WgmmaSite{__LINE__, nullptr}.ss_f16
#define hl_wgmma_ss_bf16 ::hl_emu::WgmmaSite{__LINE__, nullptr}.ss_bf16
#define hl_wgmma_rs_f16 ::hl_emu::WgmmaSite{__LINE__, nullptr}.rs_f16
#define hl_wgmma_rs_bf16 ::hl_emu::WgmmaSite{__LINE__, nullptr}.rs_bf16
// checking mode's mma_async: hl_emu_wgmma_site(where).ss_f16<N, TA, TB>(...), ...
#define hl_emu_wgmma_site(where) ::hl_emu::WgmmaSite{__LINE__, (where)}
#define hl_wgmma_fence() ::hl_emu::wgmma_fence(__LINE__)
#define hl_wgmma_commit_group() ::hl_emu::wgmma_commit_group(__LINE__)
#define hl_wgmma_wait_group ::hl_emu::WgmmaSite{__LINE__, nullptr}.wait_group
#define hl_wgmma_wait_group_registers ::hl_emu::WgmmaSite{__LINE__, nullptr}.wait_group_registers
#define hl_setmaxnreg_inc ::hl_emu::WgmmaSite{__LINE__, nullptr}.setmaxnreg
#define hl_setmaxnreg_dec ::hl_emu::WgmmaSite{__LINE__, nullptr}.setmaxnreg

#else
// ============================================================================================================
// GPU bodies (NVRTC)
#define HL_WG_DEVICE static __device__ __forceinline__
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HL_WG_SM90A 1
#define HL_WG_ON_SM90A(call) call
#else
#define HL_WG_SM90A 0
#define HL_WG_ON_SM90A(call) __trap()
#endif

HL_WG_DEVICE uint64_t hl_wgmma_make_desc(const void *tile, int byte_offset, int lbo, int sbo, int swizzle_bytes) {
    uint32_t addr = (uint32_t)__cvta_generic_to_shared((const char *)tile + byte_offset);
    uint64_t mode = swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
    return (uint64_t)((addr >> 4) & 0x3FFFu) | (uint64_t)(((unsigned)lbo >> 4) & 0x3FFFu) << 16 |
           (uint64_t)(((unsigned)sbo >> 4) & 0x3FFFu) << 32 | mode << 62;
}

// The asm operand lists of an m64nNk16 instruction: its N / 2 accumulators are operands %0 ... %(N/2 - 1), in
// groups of 4 (one a multiple of 8 columns); the other operands follow. HL_WG_Q<k>(F) applies F to the operand
// numbers 4k ... 4k + 7 (those after k groups); HL_WG_EACH<k>(X, S) applies X to the numbers of groups 0 ... k - 1,
// separated by S() (flat lists: a recursive definition would cost the preprocessor k^2 rescans). Only sm_90a
// compilations define the instructions (elsewhere every body traps), so other modules do not pay for them.
#define HL_WG_Q0(F) F(0, 1, 2, 3, 4, 5, 6, 7)
#define HL_WG_Q1(F) F(4, 5, 6, 7, 8, 9, 10, 11)
#define HL_WG_Q2(F) F(8, 9, 10, 11, 12, 13, 14, 15)
#define HL_WG_Q3(F) F(12, 13, 14, 15, 16, 17, 18, 19)
#define HL_WG_Q4(F) F(16, 17, 18, 19, 20, 21, 22, 23)
#define HL_WG_Q5(F) F(20, 21, 22, 23, 24, 25, 26, 27)
#define HL_WG_Q6(F) F(24, 25, 26, 27, 28, 29, 30, 31)
#define HL_WG_Q7(F) F(28, 29, 30, 31, 32, 33, 34, 35)
#define HL_WG_Q8(F) F(32, 33, 34, 35, 36, 37, 38, 39)
#define HL_WG_Q9(F) F(36, 37, 38, 39, 40, 41, 42, 43)
#define HL_WG_Q10(F) F(40, 41, 42, 43, 44, 45, 46, 47)
#define HL_WG_Q11(F) F(44, 45, 46, 47, 48, 49, 50, 51)
#define HL_WG_Q12(F) F(48, 49, 50, 51, 52, 53, 54, 55)
#define HL_WG_Q13(F) F(52, 53, 54, 55, 56, 57, 58, 59)
#define HL_WG_Q14(F) F(56, 57, 58, 59, 60, 61, 62, 63)
#define HL_WG_Q15(F) F(60, 61, 62, 63, 64, 65, 66, 67)
#define HL_WG_Q16(F) F(64, 65, 66, 67, 68, 69, 70, 71)
#define HL_WG_Q17(F) F(68, 69, 70, 71, 72, 73, 74, 75)
#define HL_WG_Q18(F) F(72, 73, 74, 75, 76, 77, 78, 79)
#define HL_WG_Q19(F) F(76, 77, 78, 79, 80, 81, 82, 83)
#define HL_WG_Q20(F) F(80, 81, 82, 83, 84, 85, 86, 87)
#define HL_WG_Q21(F) F(84, 85, 86, 87, 88, 89, 90, 91)
#define HL_WG_Q22(F) F(88, 89, 90, 91, 92, 93, 94, 95)
#define HL_WG_Q23(F) F(92, 93, 94, 95, 96, 97, 98, 99)
#define HL_WG_Q24(F) F(96, 97, 98, 99, 100, 101, 102, 103)
#define HL_WG_Q25(F) F(100, 101, 102, 103, 104, 105, 106, 107)
#define HL_WG_Q26(F) F(104, 105, 106, 107, 108, 109, 110, 111)
#define HL_WG_Q27(F) F(108, 109, 110, 111, 112, 113, 114, 115)
#define HL_WG_Q28(F) F(112, 113, 114, 115, 116, 117, 118, 119)
#define HL_WG_Q29(F) F(116, 117, 118, 119, 120, 121, 122, 123)
#define HL_WG_Q30(F) F(120, 121, 122, 123, 124, 125, 126, 127)
#define HL_WG_Q31(F) F(124, 125, 126, 127, 128, 129, 130, 131)
#define HL_WG_Q32(F) F(128, 129, 130, 131, 132, 133, 134, 135)

#define HL_WG_EACH1(X, S) HL_WG_Q0(X)
#define HL_WG_EACH2(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X)
#define HL_WG_EACH3(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X)
#define HL_WG_EACH4(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X)
#define HL_WG_EACH5(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X)
#define HL_WG_EACH6(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) S() HL_WG_Q5(X)
#define HL_WG_EACH7(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X)
#define HL_WG_EACH8(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X)
#define HL_WG_EACH9(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X)
#define HL_WG_EACH10(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X)
#define HL_WG_EACH11(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X)
#define HL_WG_EACH12(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X)
#define HL_WG_EACH13(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X)
#define HL_WG_EACH14(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X)
#define HL_WG_EACH15(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X)
#define HL_WG_EACH16(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X)
#define HL_WG_EACH17(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X)
#define HL_WG_EACH18(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X)
#define HL_WG_EACH19(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X)
#define HL_WG_EACH20(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X)
#define HL_WG_EACH21(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X)
#define HL_WG_EACH22(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X) S() HL_WG_Q21(X)
#define HL_WG_EACH23(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X) S() HL_WG_Q21(X) S() HL_WG_Q22(X)
#define HL_WG_EACH24(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X) S() HL_WG_Q21(X) S() HL_WG_Q22(X) \
    S() HL_WG_Q23(X)
#define HL_WG_EACH25(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X) S() HL_WG_Q21(X) S() HL_WG_Q22(X) \
    S() HL_WG_Q23(X) S() HL_WG_Q24(X)
#define HL_WG_EACH26(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X) S() HL_WG_Q21(X) S() HL_WG_Q22(X) \
    S() HL_WG_Q23(X) S() HL_WG_Q24(X) S() HL_WG_Q25(X)
#define HL_WG_EACH27(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X) S() HL_WG_Q21(X) S() HL_WG_Q22(X) \
    S() HL_WG_Q23(X) S() HL_WG_Q24(X) S() HL_WG_Q25(X) S() HL_WG_Q26(X)
#define HL_WG_EACH28(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X) S() HL_WG_Q21(X) S() HL_WG_Q22(X) \
    S() HL_WG_Q23(X) S() HL_WG_Q24(X) S() HL_WG_Q25(X) S() HL_WG_Q26(X) S() HL_WG_Q27(X)
#define HL_WG_EACH29(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X) S() HL_WG_Q21(X) S() HL_WG_Q22(X) \
    S() HL_WG_Q23(X) S() HL_WG_Q24(X) S() HL_WG_Q25(X) S() HL_WG_Q26(X) S() HL_WG_Q27(X) S() HL_WG_Q28(X)
#define HL_WG_EACH30(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X) S() HL_WG_Q21(X) S() HL_WG_Q22(X) \
    S() HL_WG_Q23(X) S() HL_WG_Q24(X) S() HL_WG_Q25(X) S() HL_WG_Q26(X) S() HL_WG_Q27(X) S() HL_WG_Q28(X) \
    S() HL_WG_Q29(X)
#define HL_WG_EACH31(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X) S() HL_WG_Q21(X) S() HL_WG_Q22(X) \
    S() HL_WG_Q23(X) S() HL_WG_Q24(X) S() HL_WG_Q25(X) S() HL_WG_Q26(X) S() HL_WG_Q27(X) S() HL_WG_Q28(X) \
    S() HL_WG_Q29(X) S() HL_WG_Q30(X)
#define HL_WG_EACH32(X, S) HL_WG_Q0(X) S() HL_WG_Q1(X) S() HL_WG_Q2(X) S() HL_WG_Q3(X) S() HL_WG_Q4(X) \
    S() HL_WG_Q5(X) S() HL_WG_Q6(X) S() HL_WG_Q7(X) S() HL_WG_Q8(X) S() HL_WG_Q9(X) S() HL_WG_Q10(X) \
    S() HL_WG_Q11(X) S() HL_WG_Q12(X) S() HL_WG_Q13(X) S() HL_WG_Q14(X) S() HL_WG_Q15(X) S() HL_WG_Q16(X) \
    S() HL_WG_Q17(X) S() HL_WG_Q18(X) S() HL_WG_Q19(X) S() HL_WG_Q20(X) S() HL_WG_Q21(X) S() HL_WG_Q22(X) \
    S() HL_WG_Q23(X) S() HL_WG_Q24(X) S() HL_WG_Q25(X) S() HL_WG_Q26(X) S() HL_WG_Q27(X) S() HL_WG_Q28(X) \
    S() HL_WG_Q29(X) S() HL_WG_Q30(X) S() HL_WG_Q31(X)

#define HL_WG_STR4(a, b, c, d, e, f, g, h) "%" #a ", %" #b ", %" #c ", %" #d
#define HL_WG_OUT4(a, b, c, d, e, f, g, h) "+f"(d_[a]), "+f"(d_[b]), "+f"(d_[c]), "+f"(d_[d])
#define HL_WG_STRSEP() ", "
#define HL_WG_COMMA() ,
// descriptors A and B, scale-d, the transpose bits: the operands after the accumulators
#define HL_WG_SS_PRED(a, b, c, d, e, f, g, h) "{\n.reg .pred p;\nsetp.ne.b32 p, %" #c ", 0;\n"
#define HL_WG_SS_TAIL(a, b, c, d, e, f, g, h) "%" #a ", %" #b ", p, 1, 1, %" #d ", %" #e ";\n}\n"
// A's four registers, descriptor B, scale-d, B's transpose bit
#define HL_WG_RS_PRED(a, b, c, d, e, f, g, h) "{\n.reg .pred p;\nsetp.ne.b32 p, %" #f ", 0;\n"
#define HL_WG_RS_TAIL(a, b, c, d, e, f, g, h) "{%" #a ", %" #b ", %" #c ", %" #d "}, %" #e ", p, 1, 1, %" #g ";\n}\n"

#if HL_WG_SM90A
template <int N>
struct HlWgmma;  // specialized for each N below: the instructions of shape m64nNk16

#define HL_WGMMA_TYPE(N, K, T)                                                                                   \
    template <int TA, int TB>                                                                                    \
    HL_WG_DEVICE void ss_##T(uint64_t desc_a, uint64_t desc_b, float *d_, int scale_d) {                         \
        asm volatile(HL_WG_Q##K(HL_WG_SS_PRED) "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #T "." #T " {"   \
                     HL_WG_EACH##K(HL_WG_STR4, HL_WG_STRSEP) "}, " HL_WG_Q##K(HL_WG_SS_TAIL)                       \
                     : HL_WG_EACH##K(HL_WG_OUT4, HL_WG_COMMA)                                                    \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB)                                  \
                     : "memory");                                                                                \
    }                                                                                                            \
    template <int TB>                                                                                            \
    HL_WG_DEVICE void rs_##T(const uint32_t *a, uint64_t desc_b, float *d_, int scale_d) {                       \
        asm volatile(HL_WG_Q##K(HL_WG_RS_PRED) "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #T "." #T " {"   \
                     HL_WG_EACH##K(HL_WG_STR4, HL_WG_STRSEP) "}, " HL_WG_Q##K(HL_WG_RS_TAIL)                       \
                     : HL_WG_EACH##K(HL_WG_OUT4, HL_WG_COMMA)                                                    \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB)            \
                     : "memory");                                                                                \
    }

#define HL_WGMMA_DEFINE(N, K)      \
    template <>                    \
    struct HlWgmma<N> {            \
        HL_WGMMA_TYPE(N, K, f16)   \
        HL_WGMMA_TYPE(N, K, bf16)  \
    };

HL_WGMMA_DEFINE(8, 1)
HL_WGMMA_DEFINE(16, 2)
HL_WGMMA_DEFINE(24, 3)
HL_WGMMA_DEFINE(32, 4)
HL_WGMMA_DEFINE(40, 5)
HL_WGMMA_DEFINE(48, 6)
HL_WGMMA_DEFINE(56, 7)
HL_WGMMA_DEFINE(64, 8)
HL_WGMMA_DEFINE(72, 9)
HL_WGMMA_DEFINE(80, 10)
HL_WGMMA_DEFINE(88, 11)
HL_WGMMA_DEFINE(96, 12)
HL_WGMMA_DEFINE(104, 13)
HL_WGMMA_DEFINE(112, 14)
HL_WGMMA_DEFINE(120, 15)
HL_WGMMA_DEFINE(128, 16)
HL_WGMMA_DEFINE(136, 17)
HL_WGMMA_DEFINE(144, 18)
HL_WGMMA_DEFINE(152, 19)
HL_WGMMA_DEFINE(160, 20)
HL_WGMMA_DEFINE(168, 21)
HL_WGMMA_DEFINE(176, 22)
HL_WGMMA_DEFINE(184, 23)
HL_WGMMA_DEFINE(192, 24)
HL_WGMMA_DEFINE(200, 25)
HL_WGMMA_DEFINE(208, 26)
HL_WGMMA_DEFINE(216, 27)
HL_WGMMA_DEFINE(224, 28)
HL_WGMMA_DEFINE(232, 29)
HL_WGMMA_DEFINE(240, 30)
HL_WGMMA_DEFINE(248, 31)
HL_WGMMA_DEFINE(256, 32)
#endif  // HL_WG_SM90A

#define HL_WGMMA_CHECK_SHAPE(N) \
    static_assert((N) % 8 == 0 && (N) >= 8 && (N) <= 256, "wgmma m64nNk16: N is a multiple of 8 from 8 to 256")

#define HL_WGMMA_ENTRY(T)                                                                                     \
    template <int N, int TA, int TB>                                                                          \
    HL_WG_DEVICE void hl_wgmma_ss_##T(uint64_t desc_a, uint64_t desc_b, float *d, int scale_d) {               \
        HL_WGMMA_CHECK_SHAPE(N);                                                                              \
        HL_WG_ON_SM90A((HlWgmma<N>::template ss_##T<TA, TB>(desc_a, desc_b, d, scale_d)));                    \
    }                                                                                                         \
    template <int N, int TB>                                                                                  \
    HL_WG_DEVICE void hl_wgmma_rs_##T(const uint32_t *a, uint64_t desc_b, float *d, int scale_d) {             \
        HL_WGMMA_CHECK_SHAPE(N);                                                                              \
        HL_WG_ON_SM90A((HlWgmma<N>::template rs_##T<TB>(a, desc_b, d, scale_d)));                             \
    }
HL_WGMMA_ENTRY(f16)
HL_WGMMA_ENTRY(bf16)

HL_WG_DEVICE void hl_wgmma_fence(void) {
#if HL_WG_SM90A
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}

HL_WG_DEVICE void hl_wgmma_commit_group(void) {
#if HL_WG_SM90A
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}

template <int N>
HL_WG_DEVICE void hl_wgmma_wait_group(void) {
#if HL_WG_SM90A
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
    __trap();
#endif
}

template <int G, int N>
HL_WG_DEVICE void hl_wgmma_wait_group_registers(float *d) {
    HL_WGMMA_CHECK_SHAPE(N);
    hl_wgmma_wait_group<G>();
#pragma unroll
    for (int i = 0; i < N / 2; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

template <int R>
HL_WG_DEVICE void hl_setmaxnreg_inc(void) {
    static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg: 24 to 256 registers, a multiple of 8");
#if HL_WG_SM90A
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
#else
    __trap();
#endif
}

template <int R>
HL_WG_DEVICE void hl_setmaxnreg_dec(void) {
    static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg: 24 to 256 registers, a multiple of 8");
#if HL_WG_SM90A
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
#else
    __trap();
#endif
}

#undef HL_WG_SM90A
#undef HL_WG_ON_SM90A
#undef HL_WG_DEVICE
#endif  // HIDET_LANG_EMULATOR

#endif  // HIDET_LANG_HOPPER_WGMMA_H
