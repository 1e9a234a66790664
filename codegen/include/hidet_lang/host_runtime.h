// hidet_lang host runtime: what every generated host source (C for the CPU, the host half of a CUDA module)
// relies on, included first: the standard headers, HL_EXPORT for the functions Python calls, HL_NOINLINE for
// functions compiled on their own (attrs.noinline), HL_FAST_MATH (attrs.fast_math), the channel of
// failed host assertions (hidet_lang_assert_status), the guarded integer division (int_division.h), the defined
// float -> integer conversions (float_to_int.h), the checking mode's bounds checks, zero divisors and conversions
// out of range (HL_CHECKED, HL_CHECKED_IN for views, hl_division_by_zero, hidet_lang_bounds_status,
// hl_conversion_warning) and hidet_lang_flush. C, and C++ when a CUDA module runs on the emulator.
#pragma once
#ifndef HIDET_LANG_HOST_RUNTIME_H
#define HIDET_LANG_HOST_RUNTIME_H

#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "int_division.h"
#include "float_to_int.h"

#ifdef __cplusplus
#define HL_EXPORT extern "C"
#else
#define HL_EXPORT
#endif

// A function kept out of line and out of the interprocedural passes: GCC neither inlines nor clones it, nor
// narrows what it assumes of the arguments from its callers, so its code is the same whoever calls it.
#if defined(__GNUC__) && !defined(__clang__)
#define HL_NOINLINE __attribute__((noinline, noipa))
#else
#define HL_NOINLINE __attribute__((noinline))
#endif

// A fast-math function (attrs.fast_math): GCC compiles it as under -ffast-math -ffp-contract=fast, the rest of the
// translation unit keeps the strict flags; nothing is linked that would set flush-to-zero for the whole process.
// Other compilers build it strictly. The small helpers (min, max, ...) are always inlined, so that they compile
// under the flags of the function that uses them.
#if defined(__GNUC__) && !defined(__clang__)
#define HL_FAST_MATH __attribute__((optimize("fast-math", "fp-contract=fast")))
#else
#define HL_FAST_MATH
#endif
#define HL_HELPER static inline __attribute__((always_inline))

static volatile int hl_host_assert_failed = 0;
static const char *hl_host_assert_message = 0;
static int hl_host_assert_line = 0;

static void hl_host_assert_fail(const char *message, int line) {
    if (__atomic_exchange_n(&hl_host_assert_failed, 1, __ATOMIC_SEQ_CST) == 0) {
        hl_host_assert_message = message;
        hl_host_assert_line = line;
    }
}

HL_EXPORT int hidet_lang_assert_status(const char **message, int *line) {
    int failed = hl_host_assert_failed;
    if (failed) {
        *message = hl_host_assert_message;
        *line = hl_host_assert_line;
        hl_host_assert_failed = 0;
    }
    return failed;
}

/* The checking mode's first failure: 0 none, 1 an index out of bounds, 2 an integer division by zero. */
enum { HL_CHECK_INDEX = 1, HL_CHECK_DIVISION = 2 };
static char hl_bounds_message[512];
static volatile int hl_bounds_failed = 0;
static char hl_bounds_scratch[64] __attribute__((aligned(64)));

/* An index outside a tensor in checking mode: record the first one; the access goes to a scratch buffer. */
static void *hl_bounds_fail(long long index, long long extent, const char *name, const char *where) {
    if (__atomic_exchange_n(&hl_bounds_failed, HL_CHECK_INDEX, __ATOMIC_SEQ_CST) == 0) {
        snprintf(hl_bounds_message, sizeof hl_bounds_message,
                 "%s: index %lld is out of bounds for '%s', which has %lld elements", where, index, name, extent);
    }
    return hl_bounds_scratch;
}

/* An integer division or modulo by zero in checking mode: record the first one (the result is int_division.h's). */
static void hl_division_by_zero(const char *where) {
    if (__atomic_exchange_n(&hl_bounds_failed, HL_CHECK_DIVISION, __ATOMIC_SEQ_CST) == 0) {
        snprintf(hl_bounds_message, sizeof hl_bounds_message, "%s: integer division or modulo by zero", where);
    }
}

/* A float converted to an integer type that cannot hold it, in checking mode: recorded for a warning (float_to_int.h's
   `warn`; the result is the saturated one). */
static void hl_conversion_warning(const char *where, const char *from, const char *to, double value) {
    char buf[512];
    hl_conversion_describe(buf, sizeof buf, where, from, to, value);
    hl_conversion_record(buf);
}

/* The first index of an access starting at `index` (and running past the end) outside a tensor of `extent`. */
static inline long long hl_first_outside(long long index, long long extent) {
    return index < 0 || index >= extent ? index : extent;
}

/* The address of `base[index]` in checking mode, where the access covers `count` elements from there (a vector
   load or store covers its lanes); a failure reports the first index outside the tensor. */
#define HL_CHECKED(base, index, count, extent, name, where)                                                    \
    ((long long)(index) >= 0 && (long long)(index) + (count) <= (long long)(extent) ? &(base)[index]          \
     : (__typeof__(&(base)[0]))hl_bounds_fail(hl_first_outside((long long)(index), (long long)(extent)),     \
                                              (long long)(extent), name, where))

/* Checking mode's access `base[index]` (of `count` elements) through a pointer into the tensor `origin` of `bytes`
   bytes (a view, which may claim more elements than its origin has): the elements must lie within the origin. */
static inline long long hl_origin_offset(const void *origin, const void *base, long long index, long long size) {
    return (long long)((uintptr_t)base - (uintptr_t)origin) + index * size;
}

static void *hl_origin_fail(long long index, long long offset, long long bytes, const char *name,
                            const char *origin_name, const char *where) {
    if (__atomic_exchange_n(&hl_bounds_failed, HL_CHECK_INDEX, __ATOMIC_SEQ_CST) == 0) {
        snprintf(hl_bounds_message, sizeof hl_bounds_message,
                 "%s: index %lld is out of bounds for '%s': the element lies %lld bytes from the start of '%s', "
                 "which has %lld bytes", where, index, name, offset, origin_name, bytes);
    }
    return hl_bounds_scratch;
}

#define HL_ORIGIN_OFFSET(base, index, origin) \
    hl_origin_offset((origin), (base), (long long)(index), (long long)sizeof((base)[0]))
#define HL_CHECKED_IN(base, index, count, origin, bytes, name, origin_name, where)                               \
    (HL_ORIGIN_OFFSET(base, index, origin) >= 0 &&                                                             \
             HL_ORIGIN_OFFSET(base, index, origin) + (count) * (long long)sizeof((base)[0]) <= (long long)(bytes) \
         ? &(base)[index]                                                                                      \
         : (__typeof__(&(base)[0]))hl_origin_fail((long long)(index), HL_ORIGIN_OFFSET(base, index, origin),    \
                                                  (long long)(bytes), name, origin_name, where))

/* The checking mode's first failure since the last call (HL_CHECK_*, 0: none), and its message. */
HL_EXPORT int hidet_lang_bounds_status(const char **message) {
    int failed = hl_bounds_failed;
    if (failed) {
        *message = hl_bounds_message;
        hl_bounds_failed = 0;
    }
    return failed;
}

HL_EXPORT void hidet_lang_flush(void) { fflush(stdout); }

#endif  // HIDET_LANG_HOST_RUNTIME_H
