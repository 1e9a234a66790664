// The vector types of CPU functions (hidet_lang.cpu) and their operations, as the C emitter names them:
// hl_f32x4, hl_f32x8, hl_f32x16 and hl_<type>_<operation> (load, load_aligned, store, store_aligned, prefetch,
// broadcast, setzero, fma, dot_bf16 (f32x16), exp, max, min, reduce_sum, reduce_max, reduce_min). Included by
// generated C that uses a vector type.
//
// The types are GCC/Clang vector extensions, so `+ - *` are C's own operators, lane by lane, and follow the
// project's flags like scalar code: with -ffp-contract=off the compiler never fuses `a * b + c`. The operations
// whose meaning must be exact are <immintrin.h> intrinsics: fma (one rounding), max and min (per lane
// `a > b ? a : b` / `a < b ? a : b`, the rule of the scalar hl_max/hl_min), broadcast. Loads and stores are
// memcpy (no aliasing or alignment assumption; the aligned ones tell the compiler the alignment). The sums and
// maxima and minima of lanes use a fixed tree order: lane i with lane i + n/2, halving until one is left.
// exp (hl_<type>_exp) is computed here, lane by lane, from the type's own operations (see HL_F32_EXP below); its
// error is at most 1 ulp for normal results, and results below them are within 1 ulp of their spacing (2^-149).
// Each type is defined only where the compiler enables its instruction set (SSE, AVX, AVX-512F; FMA for the fma
// and exp of the first two); hidet_lang.passes.vector_rules refuses a program that needs one it does not.
#pragma once
#ifndef HIDET_LANG_CPU_VECTORS_H
#define HIDET_LANG_CPU_VECTORS_H

#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#define HL_F32_VECTOR(T, LANES, MM)                                                                              \
    typedef float T __attribute__((vector_size(4 * (LANES))));                                                   \
    static inline T T##_load(const float *p) { T v; memcpy(&v, p, sizeof v); return v; }                       \
    static inline T T##_load_aligned(const float *p) {                                                         \
        T v; memcpy(&v, __builtin_assume_aligned(p, sizeof(T)), sizeof v); return v;                           \
    }                                                                                                          \
    static inline void T##_store(float *p, T v) { memcpy(p, &v, sizeof v); }                                   \
    static inline void T##_store_aligned(float *p, T v) {                                                      \
        memcpy(__builtin_assume_aligned(p, sizeof(T)), &v, sizeof v);                                          \
    }                                                                                                          \
    static inline void T##_prefetch(const float *p) { __builtin_prefetch(p, 0, 3); }                           \
    static inline T T##_broadcast(float x) { return MM##_set1_ps(x); }                                         \
    static inline T T##_setzero(void) { return MM##_setzero_ps(); }                                            \
    static inline T T##_max(T a, T b) { return MM##_max_ps(a, b); }                                           \
    static inline T T##_min(T a, T b) { return MM##_min_ps(a, b); }                                            \
    static inline float T##_reduce_sum(T v) {                                                                  \
        float t[LANES]; memcpy(t, &v, sizeof v);                                                               \
        for (int w = (LANES) / 2; w > 0; w /= 2) for (int i = 0; i < w; i++) t[i] = t[i] + t[i + w];           \
        return t[0];                                                                                           \
    }                                                                                                          \
    static inline float T##_reduce_max(T v) {                                                                  \
        float t[LANES]; memcpy(t, &v, sizeof v);                                                               \
        for (int w = (LANES) / 2; w > 0; w /= 2)                                                               \
            for (int i = 0; i < w; i++) t[i] = t[i] > t[i + w] ? t[i] : t[i + w];                              \
        return t[0];                                                                                           \
    }                                                                                                          \
    static inline float T##_reduce_min(T v) {                                                                  \
        float t[LANES]; memcpy(t, &v, sizeof v);                                                               \
        for (int w = (LANES) / 2; w > 0; w /= 2)                                                               \
            for (int i = 0; i < w; i++) t[i] = t[i] < t[i + w] ? t[i] : t[i + w];                              \
        return t[0];                                                                                           \
    }

// e^x lane by lane, from the type's fma and `T##_exp_scale(p, n)` (p * 2^n, for an integral n in [-150, 128],
// rounded once), in four steps:
// 1. x is clamped to [-104, 89]: below -104 e^x is under half the smallest subnormal (it rounds to 0), above 89
//    it is over the largest float (it rounds to +inf); both still come out of the steps below, so the clamp only
//    keeps n small. The clamp is max(-104, x) then min(89, .), whose rule (`a > b ? a : b`) returns the second
//    operand for a NaN, so NaN lanes stay NaN through every step.
// 2. Range reduction, x = n ln2 + r with n = round(x / ln2) (adding and subtracting 1.5 * 2^23 rounds to an
//    integer) and |r| <= ln2 / 2 (a hair more, from the rounding of x / ln2). ln2 is split in two (Cody-Waite):
//    LN2_HI = 0x1.62ep-1 has 12 significant bits, so n * LN2_HI is exact for |n| <= 150 and x - n * LN2_HI
//    is exact; LN2_LO = ln2 - LN2_HI rounded to f32 (the pair is ln2 to within 2e-12).
// 3. e^r by a degree-6 polynomial (Horner's rule, fused multiply-adds): the coefficients interpolate e^r at the
//    7 Chebyshev nodes of [-ln2/2, ln2/2] (near minimax, relative error 2.6e-9), rounded to f32; the first three
//    round to exactly 1, 1, 1/2.
// 4. Scaling by 2^n: one rounding, to +inf above the largest float and to the nearest subnormal (or 0) below the
//    normal range. AVX-512F has an instruction for it (vscalefps); the narrower types build 2^n in the exponent
//    bits as two factors 2^(n>>1) * 2^(n - (n>>1)), each a normal float for n in [-150, 128], so that the first
//    product is exact and only the second rounds: the same bits.
// Measured against float64 exp rounded to f32 over all 2^32 inputs (every width computes the same bits): at most
// 1 ulp from the correctly rounded result for normal results, and within 1 ulp of the subnormal spacing 2^-149
// below them; tests/hidet_lang/test_cpu_vector_exp.py checks a dense sweep and drawn values. +inf gives +inf,
// -inf gives +0, NaN gives NaN.
#define HL_F32_EXP(T)                                                                                            \
    static inline T T##_exp(T x) {                                                                             \
        const T clamped = T##_min(T##_broadcast(89.0f), T##_max(T##_broadcast(-104.0f), x));                    \
        const T round_shift = T##_broadcast(0x1.8p23f);                                                          \
        const T n = (clamped * T##_broadcast(0x1.715476p+0f) + round_shift) - round_shift;                       \
        T r = T##_fma(n, T##_broadcast(-0x1.62ep-1f), clamped);                                                  \
        r = T##_fma(n, T##_broadcast(-0x1.0bfbe8p-15f), r);                                                     \
        T p = T##_fma(T##_broadcast(0x1.6d7532p-10f), r, T##_broadcast(0x1.126fa6p-7f));                       \
        p = T##_fma(p, r, T##_broadcast(0x1.5554acp-5f));                                                       \
        p = T##_fma(p, r, T##_broadcast(0x1.555404p-3f));                                                       \
        p = T##_fma(p, r, T##_broadcast(0.5f));                                                                  \
        p = T##_fma(p, r, T##_broadcast(1.0f));                                                                  \
        p = T##_fma(p, r, T##_broadcast(1.0f));                                                                  \
        return T##_exp_scale(p, n);                                                                              \
    }

// p * 2^n for the exp of the types without a scaling instruction, through the exponent bits (see above).
#define HL_F32_EXP_SCALE_BY_BITS(T, LANES)                                                                       \
    typedef int T##_lanes_i32 __attribute__((vector_size(4 * (LANES))));                                        \
    static inline T T##_exp_scale(T p, T n) {                                                                  \
        const T##_lanes_i32 k = __builtin_convertvector(n, T##_lanes_i32);                                      \
        const T##_lanes_i32 half = k >> 1;                                                                       \
        return p * (T)((half + 127) << 23) * (T)((k - half + 127) << 23);                                        \
    }

#ifdef __SSE__
HL_F32_VECTOR(hl_f32x4, 4, _mm)
#ifdef __FMA__
static inline hl_f32x4 hl_f32x4_fma(hl_f32x4 a, hl_f32x4 b, hl_f32x4 c) { return _mm_fmadd_ps(a, b, c); }
HL_F32_EXP_SCALE_BY_BITS(hl_f32x4, 4)
HL_F32_EXP(hl_f32x4)
#endif
#endif

#ifdef __AVX__
HL_F32_VECTOR(hl_f32x8, 8, _mm256)
#ifdef __FMA__
static inline hl_f32x8 hl_f32x8_fma(hl_f32x8 a, hl_f32x8 b, hl_f32x8 c) { return _mm256_fmadd_ps(a, b, c); }
HL_F32_EXP_SCALE_BY_BITS(hl_f32x8, 8)
HL_F32_EXP(hl_f32x8)
#endif
#endif

#ifdef __AVX512F__
HL_F32_VECTOR(hl_f32x16, 16, _mm512)
static inline hl_f32x16 hl_f32x16_fma(hl_f32x16 a, hl_f32x16 b, hl_f32x16 c) { return _mm512_fmadd_ps(a, b, c); }
static inline hl_f32x16 hl_f32x16_exp_scale(hl_f32x16 p, hl_f32x16 n) { return _mm512_scalef_ps(p, n); }
HL_F32_EXP(hl_f32x16)
// Lane i: (acc + pair[1] * b[2i + 1]) + pair[0] * b[2i], for bfloat16 `pair` (two, in every lane) and `b` (a pair a
// lane). bf16 products are exact in f32, so each step is one rounding: AVX512-BF16's vdpbf16ps (which also treats
// subnormals as zero), or two fused multiply-adds on the pairs widened to f32 (a bf16 is the top half of its f32).
static inline hl_f32x16 hl_f32x16_dot_bf16(hl_f32x16 acc, const void *pair, const void *b) {
    int pair_bits;
    memcpy(&pair_bits, pair, sizeof pair_bits);
    __m512i b_bits;
    memcpy(&b_bits, b, sizeof b_bits);
    const __m512i a_bits = _mm512_set1_epi32(pair_bits);
#ifdef __AVX512BF16__
    return _mm512_dpbf16_ps(acc, (__m512bh)a_bits, (__m512bh)b_bits);
#else
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(a_bits, high)),
                          _mm512_castsi512_ps(_mm512_and_si512(b_bits, high)), acc);
    return _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(a_bits, 16)),
                           _mm512_castsi512_ps(_mm512_slli_epi32(b_bits, 16)), acc);
#endif
}
#endif

// One lane, a float: the same exp (hl_f32x1_exp), for the project's scalar math functions (cpu_math.h). It is made
// of C's own operations, fmaf and integer bit moves (its selects too: GCC 12 and 13 run here without loop
// if-conversion, `codegen.toolchain.compiler.workaround_flags`, and leave a loop with a `?:` scalar), so the C
// compiler may vectorize a loop that calls it in strict code; its bits are those of the vector types' exp.
typedef float hl_f32x1;
static inline float hl_f32x1_broadcast(float x) { return x; }
static inline float hl_f32x1_select(int take_a, float a, float b) {  // take_a ? a : b, by bits (no branch)
    const unsigned mask = -(unsigned)take_a;
    unsigned ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    const unsigned bits = (ua & mask) | (ub & ~mask);
    float r;
    memcpy(&r, &bits, sizeof r);
    return r;
}
static inline float hl_f32x1_min(float a, float b) { return hl_f32x1_select(a < b, a, b); }
static inline float hl_f32x1_max(float a, float b) { return hl_f32x1_select(a > b, a, b); }
static inline float hl_f32x1_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static inline float hl_f32x1_exp_scale(float p, float n) {
    const int k = (int)n, half = k >> 1, low = (half + 127) << 23, high = (k - half + 127) << 23;
    float a, b;
    memcpy(&a, &low, sizeof a);
    memcpy(&b, &high, sizeof b);
    return p * a * b;
}
HL_F32_EXP(hl_f32x1)

#undef HL_F32_VECTOR
#undef HL_F32_EXP
#undef HL_F32_EXP_SCALE_BY_BITS
#endif
