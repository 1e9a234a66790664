// hidet_lang float -> integer conversion: the defined result of converting a floating-point value to an integer
// type, where C leaves it undefined (a value out of the type's range, an infinity, NaN). Included by
// host_runtime.h (C for the CPU, the host half of a CUDA module) and cuda_primitives.h (CUDA C for NVRTC and the
// emulator), so every target computes what the GPU's cvt.rzi.sat does:
//
//   the value rounded toward zero; below the type's minimum, the minimum; above its maximum, the maximum; NaN, 0
//
// The code generator calls hl_cvt_<f>_<i>(x) for every conversion of a float type <f> (f16 bf16 f32 f64; bf16 in
// CUDA code only) to an integer type <i> (i8 i16 i32 i64 u8 u16 u32 u64), unless it knows the value is in range.
// The GPU's body is CUDA's round-toward-zero intrinsic (cvt.rzi.{s,u}{32,64}: saturating, NaN -> 0; an 8- or
// 16-bit result clamps the 32-bit one); the CPU's and the emulator's bring the value into the range where C's cast
// is defined before casting, with selects the compiler keeps branch-free (a loop of conversions still vectorizes)
// and folds away where it knows the value's range. A half-precision value converts through float, which holds it
// exactly.
// Checking mode (the CPU and the emulator only) calls hl_cvt_<f>_<i>_checked(x, where, warn) instead: a value the
// type cannot hold (after rounding toward zero), or NaN, first calls warn(where, "<f>", "<i>", value), which
// records it; hidet_lang_conversion_status() returns how many were recorded since the last call and the first's
// message (Python reports it as a ConversionWarning).
#pragma once
#ifndef HIDET_LANG_FLOAT_TO_INT_H
#define HIDET_LANG_FLOAT_TO_INT_H

#if defined(__CUDACC__)
#define HL_CVT_FN static __device__ __forceinline__
#else
#define HL_CVT_FN static inline __attribute__((always_inline))
#endif

// X(<args>, T, S, LO, HI, MAX) for each integer type T (suffix S): its least value LO and the power of two HI just
// above its greatest value MAX (LO and HI are exact in float and double).
#define HL_FOR_EACH_INT(X, ...)                                                                                  \
    X(__VA_ARGS__, int8_t, i8, -0x1p7, 0x1p7, 127)                                                             \
    X(__VA_ARGS__, int16_t, i16, -0x1p15, 0x1p15, 32767)                                                       \
    X(__VA_ARGS__, int32_t, i32, -0x1p31, 0x1p31, 2147483647)                                                  \
    X(__VA_ARGS__, int64_t, i64, -0x1p63, 0x1p63, 9223372036854775807LL)                                       \
    X(__VA_ARGS__, uint8_t, u8, 0.0, 0x1p8, 255)                                                               \
    X(__VA_ARGS__, uint16_t, u16, 0.0, 0x1p16, 65535)                                                          \
    X(__VA_ARGS__, uint32_t, u32, 0.0, 0x1p32, 4294967295U)                                                    \
    X(__VA_ARGS__, uint64_t, u64, 0.0, 0x1p64, 18446744073709551615ULL)

// A half-precision type H (suffix HS) converts through float.
#define HL_CVT_THROUGH_FLOAT(H, HS, T, S, LO, HI, MAX)                                                           \
    HL_CVT_FN T hl_cvt_##HS##_##S(H x) { return hl_cvt_f32_##S((float)x); }

#if defined(__CUDACC__)
// ============================================================================================================
// GPU bodies: cvt.rzi of a 32- or 64-bit result is the rule itself; an 8- or 16-bit result clamps the 32-bit one
// (CUDA's own cast to such a type keeps the low bits of cvt.rzi.s32: it does not saturate there).
#define HL_CVT_INTRINSIC(F, FS, T, S, CVT) HL_CVT_FN T hl_cvt_##FS##_##S(F x) { return (T)CVT(x); }
#define HL_CVT_NARROW(F, FS, T, S, LO, MAX)                                                                      \
    HL_CVT_FN T hl_cvt_##FS##_##S(F x) {                                                                       \
        const int v = hl_cvt_##FS##_i32(x);                                                                    \
        return (T)(v < (LO) ? (LO) : v > (MAX) ? (MAX) : v);                                                   \
    }
#define HL_CVT_GPU(F, FS, I32, U32, I64, U64)                                                                    \
    HL_CVT_INTRINSIC(F, FS, int32_t, i32, I32)                                                                 \
    HL_CVT_INTRINSIC(F, FS, int64_t, i64, I64)                                                                 \
    HL_CVT_INTRINSIC(F, FS, uint32_t, u32, U32)                                                                \
    HL_CVT_INTRINSIC(F, FS, uint64_t, u64, U64)                                                                \
    HL_CVT_NARROW(F, FS, int8_t, i8, -128, 127)                                                                \
    HL_CVT_NARROW(F, FS, int16_t, i16, -32768, 32767)                                                          \
    HL_CVT_NARROW(F, FS, uint8_t, u8, 0, 255)                                                                  \
    HL_CVT_NARROW(F, FS, uint16_t, u16, 0, 65535)
HL_CVT_GPU(float, f32, __float2int_rz, __float2uint_rz, __float2ll_rz, __float2ull_rz)
HL_CVT_GPU(double, f64, __double2int_rz, __double2uint_rz, __double2ll_rz, __double2ull_rz)
#undef HL_CVT_GPU
#undef HL_CVT_NARROW
#undef HL_CVT_INTRINSIC
#else
// ============================================================================================================
// CPU and emulator bodies, straight-line code: every select is of bits under a mask made from a comparison, which
// the vectorizer takes without if-converting the loop (GCC 12 and 13 build with loop if-conversion off:
// compiler.workaround_flags), so a loop of conversions vectorizes where C's cast does.
#define HL_CVT_SELECT(F, U, FS)                                                                                  \
    HL_CVT_FN F hl_cvt_select_##FS(int take, F a, F b) {                                                       \
        U ua, ub;                                                                                              \
        memcpy(&ua, &a, sizeof ua);                                                                            \
        memcpy(&ub, &b, sizeof ub);                                                                            \
        const U mask = (U)0 - (U)take, r = (ua & mask) | (ub & ~mask);                                         \
        F f;                                                                                                   \
        memcpy(&f, &r, sizeof f);                                                                              \
        return f;                                                                                              \
    }                                                                                                          \
    HL_CVT_FN F hl_cvt_keep_##FS(int take, F a) {                                                              \
        U ua;                                                                                                  \
        memcpy(&ua, &a, sizeof ua);                                                                            \
        ua &= (U)0 - (U)take;                                                                                  \
        F f;                                                                                                   \
        memcpy(&f, &ua, sizeof f);                                                                             \
        return f;                                                                                              \
    }
HL_CVT_SELECT(float, uint32_t, f32)
HL_CVT_SELECT(double, uint64_t, f64)
#undef HL_CVT_SELECT
// Where F holds the type's greatest value MAX: x clamped to [LO, MAX], NaN to 0 (keep: x where `take`, else +0),
// cast.
#define HL_CVT_CLAMPED(F, FS, T, S, LO, HI, MAX)                                                                 \
    HL_CVT_FN T hl_cvt_##FS##_##S(F x) {                                                                       \
        F c = hl_cvt_select_##FS(x < (F)(LO), (F)(LO), x);                                                     \
        c = hl_cvt_select_##FS(c > (F)(MAX), (F)(MAX), c);                                                     \
        return (T)hl_cvt_keep_##FS(c == c, c);                                                                 \
    }
// Where it does not (64-bit types; 32-bit ones in float): x where LO < x < HI, else 0 (NaN too), cast; then the
// values past either end, MAX at HI and above, LO at LO and below (where the cast gave 0).
#define HL_CVT_MASKED(F, FS, T, S, LO, HI, MAX)                                                                  \
    HL_CVT_FN T hl_cvt_##FS##_##S(F x) {                                                                       \
        const T inside = (T)hl_cvt_keep_##FS((x > (F)(LO)) & (x < (F)(HI)), x);                                \
        const T high = (T)0 - (T)(x >= (F)(HI)), low = (T)0 - (T)(x <= (F)(LO));                               \
        return (T)(inside | ((T)(MAX) & high) | ((T)(LO) & low));                                              \
    }
HL_CVT_CLAMPED(float, f32, int8_t, i8, -0x1p7, 0x1p7, 127)
HL_CVT_CLAMPED(float, f32, int16_t, i16, -0x1p15, 0x1p15, 32767)
HL_CVT_MASKED(float, f32, int32_t, i32, -0x1p31, 0x1p31, 2147483647)
HL_CVT_MASKED(float, f32, int64_t, i64, -0x1p63, 0x1p63, 9223372036854775807LL)
HL_CVT_CLAMPED(float, f32, uint8_t, u8, 0.0, 0x1p8, 255)
HL_CVT_CLAMPED(float, f32, uint16_t, u16, 0.0, 0x1p16, 65535)
HL_CVT_MASKED(float, f32, uint32_t, u32, 0.0, 0x1p32, 4294967295U)
HL_CVT_MASKED(float, f32, uint64_t, u64, 0.0, 0x1p64, 18446744073709551615ULL)
HL_CVT_CLAMPED(double, f64, int8_t, i8, -0x1p7, 0x1p7, 127)
HL_CVT_CLAMPED(double, f64, int16_t, i16, -0x1p15, 0x1p15, 32767)
HL_CVT_CLAMPED(double, f64, int32_t, i32, -0x1p31, 0x1p31, 2147483647)
HL_CVT_MASKED(double, f64, int64_t, i64, -0x1p63, 0x1p63, 9223372036854775807LL)
HL_CVT_CLAMPED(double, f64, uint8_t, u8, 0.0, 0x1p8, 255)
HL_CVT_CLAMPED(double, f64, uint16_t, u16, 0.0, 0x1p16, 65535)
HL_CVT_CLAMPED(double, f64, uint32_t, u32, 0.0, 0x1p32, 4294967295U)
HL_CVT_MASKED(double, f64, uint64_t, u64, 0.0, 0x1p64, 18446744073709551615ULL)
#undef HL_CVT_MASKED
#undef HL_CVT_CLAMPED
#endif

#if defined(__CUDACC__) || defined(HIDET_LANG_EMULATOR)
HL_FOR_EACH_INT(HL_CVT_THROUGH_FLOAT, half, f16)
HL_FOR_EACH_INT(HL_CVT_THROUGH_FLOAT, __nv_bfloat16, bf16)
#elif defined(__FLT16_MAX__)  // a C compiler with _Float16 (the f16 of C code)
HL_FOR_EACH_INT(HL_CVT_THROUGH_FLOAT, _Float16, f16)
#endif

#if !defined(__CUDACC__)
// ============================================================================================================
// Checking mode: the first recorded conversion's message, and how many there were since the last status.
typedef void (*hl_conversion_warn_fn)(const char *where, const char *from, const char *to, double value);
static char hl_conversion_message[512];
static volatile int hl_conversion_claimed = 0;
static volatile long long hl_conversion_count = 0;

// Record a conversion's message (kept if it is the first since the last status).
static void hl_conversion_record(const char *message) {
    if (__atomic_exchange_n(&hl_conversion_claimed, 1, __ATOMIC_SEQ_CST) == 0) {
        snprintf(hl_conversion_message, sizeof hl_conversion_message, "%s", message);
    }
    __atomic_fetch_add(&hl_conversion_count, 1, __ATOMIC_SEQ_CST);
}

// The text of a conversion out of range: `where: <value> (<from>) is outside the range of <to>: ...`, or of NaN.
static void hl_conversion_describe(char *buf, size_t size, const char *where, const char *from, const char *to,
                                   double value) {
    if (value != value) {
        snprintf(buf, size, "%s: NaN (%s) converted to %s gives 0", where, from, to);
    } else {
        snprintf(buf, size, "%s: %.9g (%s) is outside the range of %s: the conversion saturates", where, value,
                 from, to);
    }
}

#ifdef __cplusplus
extern "C"
#endif
int hidet_lang_conversion_status(const char **message) {
    long long count = __atomic_exchange_n(&hl_conversion_count, 0, __ATOMIC_SEQ_CST);
    if (count) {
        *message = hl_conversion_message;
        __atomic_store_n(&hl_conversion_claimed, 0, __ATOMIC_SEQ_CST);
    }
    return count > 0x7fffffff ? 0x7fffffff : (int)count;
}

// The checked conversion of a type F (suffix FS) whose values W holds exactly.
#define HL_CVT_CHECKED(F, FS, W, T, S, LO, HI, MAX)                                                              \
    static inline T hl_cvt_##FS##_##S##_checked(F x, const char *where, hl_conversion_warn_fn warn) {         \
        const double t = trunc((double)(W)x);                                                                  \
        if (__builtin_expect(!(t >= (LO) && t < (HI)), 0)) warn(where, #FS, #S, (double)(W)x);                 \
        return hl_cvt_##FS##_##S(x);                                                                           \
    }
HL_FOR_EACH_INT(HL_CVT_CHECKED, float, f32, float)
HL_FOR_EACH_INT(HL_CVT_CHECKED, double, f64, double)
#if defined(HIDET_LANG_EMULATOR)
HL_FOR_EACH_INT(HL_CVT_CHECKED, half, f16, float)
HL_FOR_EACH_INT(HL_CVT_CHECKED, __nv_bfloat16, bf16, float)
#elif defined(__FLT16_MAX__)
HL_FOR_EACH_INT(HL_CVT_CHECKED, _Float16, f16, float)
#endif
#undef HL_CVT_CHECKED
#endif

#undef HL_CVT_THROUGH_FLOAT
#undef HL_FOR_EACH_INT
#undef HL_CVT_FN
#endif  // HIDET_LANG_FLOAT_TO_INT_H
