// The vector types of CPU functions (hidet_lang.cpu) and their operations, as the C emitter names them:
// hl_f32x4, hl_f32x8, hl_f32x16 and hl_<type>_<operation> (load, load_aligned, store, store_aligned, broadcast,
// setzero, fma, max, min, reduce_sum, reduce_max). Included by generated C that uses a vector type.
//
// The types are GCC/Clang vector extensions, so `+ - *` are C's own operators, lane by lane, and follow the
// project's flags like scalar code: with -ffp-contract=off the compiler never fuses `a * b + c`. The operations
// whose meaning must be exact are <immintrin.h> intrinsics: fma (one rounding), max and min (per lane
// `a > b ? a : b` / `a < b ? a : b`, the rule of the scalar hl_max/hl_min), broadcast. Loads and stores are
// memcpy (no aliasing or alignment assumption; the aligned ones tell the compiler the alignment). The sums and
// maxima of lanes use a fixed tree order: lane i with lane i + n/2, halving until one is left.
// Each type is defined only where the compiler enables its instruction set (SSE, AVX, AVX-512F; FMA for the fma
// of the first two); hidet_lang.passes.vector_rules refuses a program that needs one it does not.
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
    }

#ifdef __SSE__
HL_F32_VECTOR(hl_f32x4, 4, _mm)
#ifdef __FMA__
static inline hl_f32x4 hl_f32x4_fma(hl_f32x4 a, hl_f32x4 b, hl_f32x4 c) { return _mm_fmadd_ps(a, b, c); }
#endif
#endif

#ifdef __AVX__
HL_F32_VECTOR(hl_f32x8, 8, _mm256)
#ifdef __FMA__
static inline hl_f32x8 hl_f32x8_fma(hl_f32x8 a, hl_f32x8 b, hl_f32x8 c) { return _mm256_fmadd_ps(a, b, c); }
#endif
#endif

#ifdef __AVX512F__
HL_F32_VECTOR(hl_f32x16, 16, _mm512)
static inline hl_f32x16 hl_f32x16_fma(hl_f32x16 a, hl_f32x16 b, hl_f32x16 c) { return _mm512_fmadd_ps(a, b, c); }
#endif

#undef HL_F32_VECTOR
#endif
