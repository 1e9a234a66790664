// hidet_lang CUDA emulator: half precision types: __half (half) and __nv_bfloat16, with CUDA's conversions and
// operators. Conversions round to nearest even, as the GPU does; arithmetic is done in float and rounded once
// (exact for + - * / since float has more than 2p+2 bits of precision); NaN converts to the canonical NaN 0x7fff.
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_HALF_H
#define HIDET_LANG_EMULATOR_HALF_H

namespace hl_emu {

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return 0x7fffu;                      // NaN
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // >= 65520 rounds to infinity
    if (x >= 0x38800000u) {                                   // normal half: rebias, round to nearest even
        x += 0xc8000fffu + ((x >> 13) & 1u);
        return (uint16_t)(sign | (x >> 13));
    }
    // subnormal or zero: adding 0.5 aligns the half subnormal unit (2^-24) with the float ulp of 0.5
    float t = bits_f32(x) + 0.5f;
    return (uint16_t)(sign | (f32_bits(t) - 0x3f000000u));
}

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f;  // m * 2^-24, exact
        return sign ? -v : v;
    }
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;  // NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static inline float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

// double -> float rounding to odd: a following float -> half / bfloat16 rounding is then a single correct
// rounding of the double (float has at least p + 2 bits for both).
static inline float f64_to_f32_odd(double d) {
    if (d != d) return bits_f32(0x7fc00000u);
    float f = (float)d;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    if ((double)f != d) f = bits_f32(f32_bits(f) | 1u);
    return f;
}

// integer -> float rounding to odd (see f64_to_f32_odd)
static inline float u64_to_f32_odd(uint64_t u) {
    if (u < (1ull << 24)) return (float)u;
    int shift = 64 - __builtin_clzll(u) - 24;
    uint64_t m = u >> shift;
    if (u & ((1ull << shift) - 1)) m |= 1;
    return ldexpf((float)m, shift);
}

static inline float i64_to_f32_odd(int64_t v) {
    return v < 0 ? -u64_to_f32_odd(0ull - (uint64_t)v) : u64_to_f32_odd((uint64_t)v);
}

// float -> integer, rounding toward zero, saturating, NaN -> 0 (the GPU's cvt.rzi)
template <class I>
static inline I f32_to_int_rz(float f) {
    if (f != f) return 0;
    const bool is_signed = (I)-1 < 0;
    const int bits = (int)sizeof(I) * 8;
    const I lowest = is_signed ? (I)(1ull << (bits - 1)) : (I)0;
    const I highest = (I)~lowest;
    const double lo = is_signed ? -ldexp(1.0, bits - 1) : 0.0;
    const double hi = is_signed ? ldexp(1.0, bits - 1) : ldexp(1.0, bits);  // exclusive
    double d = (double)f;
    if (d <= lo) return lowest;
    if (d >= hi) return highest;
    return (I)d;
}

}  // namespace hl_emu

struct __half;
struct __nv_bfloat16;

struct __half_raw {
    unsigned short x;
};

struct __nv_bfloat16_raw {
    unsigned short x;
};

#define HL_EMU_HALF_TYPE(T, RAW, TO_BITS, FROM_BITS, OTHER)                                                         \
    struct __attribute__((aligned(2))) T {                                                                         \
        unsigned short __x;                                                                                        \
        T() = default;                                                                                             \
        constexpr T(const RAW &r) : __x(r.x) {}                                                                    \
        explicit T(const OTHER o);                                                                                 \
        T(const float f) : __x(TO_BITS(f)) {}                                                                      \
        T(const double f) : __x(TO_BITS(::hl_emu::f64_to_f32_odd(f))) {}                                          \
        T(const short v) : __x(TO_BITS((float)v)) {}                                                               \
        T(const unsigned short v) : __x(TO_BITS((float)v)) {}                                                      \
        T(const int v) : __x(TO_BITS(::hl_emu::i64_to_f32_odd(v))) {}                                              \
        T(const unsigned int v) : __x(TO_BITS(::hl_emu::u64_to_f32_odd(v))) {}                                     \
        T(const long v) : __x(TO_BITS(::hl_emu::i64_to_f32_odd(v))) {}                                             \
        T(const unsigned long v) : __x(TO_BITS(::hl_emu::u64_to_f32_odd(v))) {}                                    \
        T(const long long v) : __x(TO_BITS(::hl_emu::i64_to_f32_odd(v))) {}                                        \
        T(const unsigned long long v) : __x(TO_BITS(::hl_emu::u64_to_f32_odd(v))) {}                               \
        T &operator=(const RAW &r) {                                                                               \
            __x = r.x;                                                                                             \
            return *this;                                                                                          \
        }                                                                                                          \
        T &operator=(const float f) {                                                                              \
            __x = TO_BITS(f);                                                                                      \
            return *this;                                                                                          \
        }                                                                                                          \
        T &operator=(const double f) {                                                                             \
            __x = TO_BITS(::hl_emu::f64_to_f32_odd(f));                                                            \
            return *this;                                                                                          \
        }                                                                                                          \
        operator RAW() const { return RAW{__x}; }                                                                  \
        operator float() const { return FROM_BITS(__x); }                                                          \
        operator signed char() const { return ::hl_emu::f32_to_int_rz<signed char>(FROM_BITS(__x)); }             \
        operator unsigned char() const { return ::hl_emu::f32_to_int_rz<unsigned char>(FROM_BITS(__x)); }         \
        operator char() const { return (char)::hl_emu::f32_to_int_rz<signed char>(FROM_BITS(__x)); }              \
        operator short() const { return ::hl_emu::f32_to_int_rz<short>(FROM_BITS(__x)); }                         \
        operator unsigned short() const { return ::hl_emu::f32_to_int_rz<unsigned short>(FROM_BITS(__x)); }       \
        operator int() const { return ::hl_emu::f32_to_int_rz<int>(FROM_BITS(__x)); }                             \
        operator unsigned int() const { return ::hl_emu::f32_to_int_rz<unsigned int>(FROM_BITS(__x)); }           \
        operator long() const { return ::hl_emu::f32_to_int_rz<long>(FROM_BITS(__x)); }                           \
        operator unsigned long() const { return ::hl_emu::f32_to_int_rz<unsigned long>(FROM_BITS(__x)); }         \
        operator long long() const { return ::hl_emu::f32_to_int_rz<long long>(FROM_BITS(__x)); }                 \
        operator unsigned long long() const { return ::hl_emu::f32_to_int_rz<unsigned long long>(FROM_BITS(__x)); } \
        constexpr operator bool() const { return (__x & 0x7fffu) != 0; }                                           \
    };                                                                                                             \
    static inline T operator+(const T &a, const T &b) { return T((float)a + (float)b); }                           \
    static inline T operator-(const T &a, const T &b) { return T((float)a - (float)b); }                           \
    static inline T operator*(const T &a, const T &b) { return T((float)a * (float)b); }                           \
    static inline T operator/(const T &a, const T &b) { return T((float)a / (float)b); }                           \
    static inline T &operator+=(T &a, const T &b) { return a = a + b; }                                            \
    static inline T &operator-=(T &a, const T &b) { return a = a - b; }                                            \
    static inline T &operator*=(T &a, const T &b) { return a = a * b; }                                            \
    static inline T &operator/=(T &a, const T &b) { return a = a / b; }                                            \
    static inline T &operator++(T &a) { return a = a + T(1.0f); }                                                  \
    static inline T &operator--(T &a) { return a = a - T(1.0f); }                                                  \
    static inline T operator++(T &a, int) {                                                                        \
        T r = a;                                                                                                   \
        a = a + T(1.0f);                                                                                           \
        return r;                                                                                                  \
    }                                                                                                              \
    static inline T operator--(T &a, int) {                                                                        \
        T r = a;                                                                                                   \
        a = a - T(1.0f);                                                                                           \
        return r;                                                                                                  \
    }                                                                                                              \
    static inline T operator+(const T &a) { return a; }                                                            \
    static inline T operator-(const T &a) {                                                                        \
        T r;                                                                                                       \
        r.__x = (unsigned short)(a.__x ^ 0x8000u);                                                                 \
        return r;                                                                                                  \
    }                                                                                                              \
    static inline bool operator==(const T &a, const T &b) { return (float)a == (float)b; }                         \
    static inline bool operator!=(const T &a, const T &b) { return (float)a != (float)b; }                         \
    static inline bool operator<(const T &a, const T &b) { return (float)a < (float)b; }                           \
    static inline bool operator>(const T &a, const T &b) { return (float)a > (float)b; }                           \
    static inline bool operator<=(const T &a, const T &b) { return (float)a <= (float)b; }                         \
    static inline bool operator>=(const T &a, const T &b) { return (float)a >= (float)b; }

HL_EMU_HALF_TYPE(__half, __half_raw, ::hl_emu::f32_to_f16, ::hl_emu::f16_to_f32, __nv_bfloat16)
HL_EMU_HALF_TYPE(__nv_bfloat16, __nv_bfloat16_raw, ::hl_emu::f32_to_bf16, ::hl_emu::bf16_to_f32, __half)
#undef HL_EMU_HALF_TYPE

inline __half::__half(const __nv_bfloat16 o) : __x(::hl_emu::f32_to_f16((float)o)) {}
inline __nv_bfloat16::__nv_bfloat16(const __half o) : __x(::hl_emu::f32_to_bf16((float)o)) {}

typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;

static inline __half __float2half(const float f) { return __half(f); }
static inline __half __float2half_rn(const float f) { return __half(f); }
static inline __half __double2half(const double d) { return __half(d); }
static inline float __half2float(const __half h) { return (float)h; }
static inline __half __int2half_rn(const int v) { return __half(v); }
static inline int __half2int_rz(const __half h) { return (int)h; }
static inline unsigned short __half_as_ushort(const __half h) { return h.__x; }
static inline __half __ushort_as_half(const unsigned short u) { return __half(__half_raw{u}); }
static inline short __half_as_short(const __half h) { return (short)h.__x; }
static inline __half __short_as_half(const short s) { return __half(__half_raw{(unsigned short)s}); }
static inline __nv_bfloat16 __float2bfloat16(const float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(const float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __double2bfloat16(const double d) { return __nv_bfloat16(d); }
static inline float __bfloat162float(const __nv_bfloat16 h) { return (float)h; }
static inline __nv_bfloat16 __int2bfloat16_rn(const int v) { return __nv_bfloat16(v); }
static inline int __bfloat162int_rz(const __nv_bfloat16 h) { return (int)h; }
static inline unsigned short __bfloat16_as_ushort(const __nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(const unsigned short u) { return __nv_bfloat16(__nv_bfloat16_raw{u}); }
static inline short __bfloat16_as_short(const __nv_bfloat16 h) { return (short)h.__x; }
static inline __nv_bfloat16 __short_as_bfloat16(const short s) {
    return __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)s});
}

#define HL_EMU_HALF_FUNCS(T)                                                                                   \
    static inline T __hadd(const T a, const T b) { return a + b; }                                            \
    static inline T __hsub(const T a, const T b) { return a - b; }                                            \
    static inline T __hmul(const T a, const T b) { return a * b; }                                            \
    static inline T __hdiv(const T a, const T b) { return a / b; }                                            \
    static inline T __hneg(const T a) { return -a; }                                                          \
    static inline T __habs(const T a) { return T((float)fabsf((float)a)); }                                   \
    static inline T __hfma(const T a, const T b, const T c) {                                                 \
        return T(::hl_emu::f64_to_f32_odd(fma((double)(float)a, (double)(float)b, (double)(float)c)));        \
    }                                                                                                         \
    static inline T __hmax(const T a, const T b) { return T(fmaxf((float)a, (float)b)); }                     \
    static inline T __hmin(const T a, const T b) { return T(fminf((float)a, (float)b)); }                     \
    static inline bool __heq(const T a, const T b) { return a == b; }                                         \
    static inline bool __hne(const T a, const T b) { return (float)a < (float)b || (float)a > (float)b; }     \
    static inline bool __hlt(const T a, const T b) { return a < b; }                                          \
    static inline bool __hle(const T a, const T b) { return a <= b; }                                         \
    static inline bool __hgt(const T a, const T b) { return a > b; }                                          \
    static inline bool __hge(const T a, const T b) { return a >= b; }                                         \
    static inline bool __hisnan(const T a) { return (float)a != (float)a; }                                   \
    static inline int __hisinf(const T a) { return isinf((float)a) ? ((float)a < 0 ? -1 : 1) : 0; }           \
    static inline T hsqrt(const T a) { return T(sqrtf((float)a)); }                                           \
    static inline T hexp(const T a) { return T(::hl_emu::f64_to_f32_odd(exp((double)(float)a))); }           \
    static inline T hlog(const T a) { return T(::hl_emu::f64_to_f32_odd(log((double)(float)a))); }

HL_EMU_HALF_FUNCS(__half)
HL_EMU_HALF_FUNCS(__nv_bfloat16)
#undef HL_EMU_HALF_FUNCS

#endif  // HIDET_LANG_EMULATOR_HALF_H
