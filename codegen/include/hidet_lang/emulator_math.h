// hidet_lang CUDA emulator: vector types (CUDA's alignment) and a few device functions of CUDA's math and
// integer API.
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_MATH_H
#define HIDET_LANG_EMULATOR_MATH_H

// uint3 is defined with the built-in variables (emulator_builtins.h)
#define HL_EMU_VEC(T, N, A)                                                                          \
    struct __attribute__((aligned(A))) N##1 { T x; };                                               \
    struct __attribute__((aligned(2 * A))) N##2 { T x, y; };                                        \
    struct __attribute__((aligned(4 * A <= 16 ? 4 * A : 16))) N##4 { T x, y, z, w; };               \
    static inline N##1 make_##N##1(T x) { return N##1{x}; }                                         \
    static inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }                                 \
    static inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }                         \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
struct char3 { signed char x, y, z; };
struct uchar3 { unsigned char x, y, z; };
struct short3 { short x, y, z; };
struct ushort3 { unsigned short x, y, z; };
struct int3 { int x, y, z; };
struct longlong3 { long long x, y, z; };
struct ulonglong3 { unsigned long long x, y, z; };
struct float3 { float x, y, z; };
struct double3 { double x, y, z; };
HL_EMU_VEC(signed char, char, 1)
HL_EMU_VEC(unsigned char, uchar, 1)
HL_EMU_VEC(short, short, 2)
HL_EMU_VEC(unsigned short, ushort, 2)
HL_EMU_VEC(int, int, 4)
HL_EMU_VEC(unsigned int, uint, 4)
HL_EMU_VEC(long long, longlong, 8)
HL_EMU_VEC(unsigned long long, ulonglong, 8)
HL_EMU_VEC(float, float, 4)
HL_EMU_VEC(double, double, 8)
#undef HL_EMU_VEC

#define HL_EMU_MINMAX(T)                                          \
    static inline T min(const T a, const T b) { return a < b ? a : b; } \
    static inline T max(const T a, const T b) { return a > b ? a : b; }
HL_EMU_MINMAX(int)
HL_EMU_MINMAX(unsigned int)
HL_EMU_MINMAX(long)
HL_EMU_MINMAX(unsigned long)
HL_EMU_MINMAX(long long)
HL_EMU_MINMAX(unsigned long long)
#undef HL_EMU_MINMAX
static inline float min(const float a, const float b) { return fminf(a, b); }
static inline float max(const float a, const float b) { return fmaxf(a, b); }
static inline double min(const double a, const double b) { return fmin(a, b); }
static inline double max(const double a, const double b) { return fmax(a, b); }

// Names glibc may declare itself (`__expf`, C23 `rsqrtf`) are macros, not redefinitions.
static inline float hl_emu_rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double hl_emu_rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float hl_emu_rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline float hl_emu_exp10f(float x) { return powf(10.0f, x); }
static inline float hl_emu_fdividef(float x, float y) { return x / y; }
#define rsqrtf hl_emu_rsqrtf
#define rsqrt hl_emu_rsqrt
#define rcbrtf hl_emu_rcbrtf
#define __expf expf
#define __exp10f hl_emu_exp10f
#define __logf logf
#define __log2f log2f
#define __log10f log10f
#define __sinf sinf
#define __cosf cosf
#define __tanf tanf
#define __powf powf
#define __fdividef hl_emu_fdividef
// ex2.approx.ftz: 2^x, a result below the smallest normal float flushed to zero (the GPU's is within 2 ulp)
static inline float hl_ex2_approx(float x) {
    float y = exp2f(x);
    return y < 0x1p-126f ? 0.0f : y;
}
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __fadd_rn(float x, float y) { return x + y; }
static inline float __fmul_rn(float x, float y) { return x * y; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline double __fma_rn(double x, double y, double z) { return fma(x, y, z); }
static inline float __saturatef(float x) { return x != x ? 0.0f : fminf(fmaxf(x, 0.0f), 1.0f); }
static inline float __int_as_float(int v) { return ::hl_emu::bits_f32((uint32_t)v); }
static inline int __float_as_int(float f) { return (int)::hl_emu::f32_bits(f); }
static inline float __uint_as_float(unsigned int v) { return ::hl_emu::bits_f32(v); }
static inline unsigned int __float_as_uint(float f) { return ::hl_emu::f32_bits(f); }
static inline double __longlong_as_double(long long v) {
    double d;
    memcpy(&d, &v, 8);
    return d;
}
static inline long long __double_as_longlong(double d) {
    long long v;
    memcpy(&v, &d, 8);
    return v;
}
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x) {
    return ((unsigned long long)__brev((unsigned int)x) << 32) | __brev((unsigned int)(x >> 32));
}
static inline int __mul24(int x, int y) { return (int)((unsigned)(((x << 8) >> 8) * ((y << 8) >> 8))); }
static inline unsigned int __umul24(unsigned int x, unsigned int y) { return (x & 0xffffffu) * (y & 0xffffffu); }
static inline int __mulhi(int x, int y) { return (int)(((long long)x * y) >> 32); }
static inline unsigned int __umulhi(unsigned int x, unsigned int y) {
    return (unsigned int)(((unsigned long long)x * y) >> 32);
}
static inline long long __mul64hi(long long x, long long y) { return (long long)(((__int128)x * y) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
    return (unsigned long long)(((unsigned __int128)x * y) >> 64);
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <class T>
static inline T __ldg(const T *p) {
    return *p;
}
static inline long long clock64() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

#endif  // HIDET_LANG_EMULATOR_MATH_H
