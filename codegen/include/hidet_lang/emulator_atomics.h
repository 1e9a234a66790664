// hidet_lang CUDA emulator: atomics, real ones since blocks run in parallel (int, unsigned, long, unsigned long,
// long long, unsigned long long: add, sub, exchange, cas, min, max; float and double: add, sub, exchange).
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_ATOMICS_H
#define HIDET_LANG_EMULATOR_ATOMICS_H

namespace hl_emu {

#define HL_EMU_ATOMIC_INT(T)                                                                                  \
    static inline T atomic_add(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }              \
    static inline T atomic_sub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }              \
    static inline T atomic_exchange(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }        \
    static inline T atomic_cas(T *p, T compare, T v) {                                                        \
        __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);               \
        return compare;                                                                                       \
    }                                                                                                         \
    static inline T atomic_min(T *p, T v) {                                                                   \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                         \
        while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) \
            ;                                                                                                 \
        return old;                                                                                           \
    }                                                                                                         \
    static inline T atomic_max(T *p, T v) {                                                                   \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                         \
        while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) \
            ;                                                                                                 \
        return old;                                                                                           \
    }
HL_EMU_ATOMIC_INT(int)
HL_EMU_ATOMIC_INT(unsigned int)
HL_EMU_ATOMIC_INT(long)
HL_EMU_ATOMIC_INT(unsigned long)
HL_EMU_ATOMIC_INT(long long)
HL_EMU_ATOMIC_INT(unsigned long long)
#undef HL_EMU_ATOMIC_INT

#define HL_EMU_ATOMIC_FLOAT(T, U)                                                                             \
    static inline T atomic_add(T *p, T v) {                                                                   \
        typedef U __attribute__((may_alias)) UA;                                                              \
        UA *q = (UA *)p;                                                                                      \
        U old = __atomic_load_n(q, __ATOMIC_RELAXED);                                                         \
        for (;;) {                                                                                            \
            T f = from_slot<T>(old);                                                                          \
            U nb = (U)to_slot<T>(f + v);                                                                      \
            if (__atomic_compare_exchange_n(q, &old, nb, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return f; \
        }                                                                                                     \
    }                                                                                                         \
    static inline T atomic_sub(T *p, T v) { return atomic_add(p, -v); }                                       \
    static inline T atomic_exchange(T *p, T v) {                                                              \
        typedef U __attribute__((may_alias)) UA;                                                              \
        return from_slot<T>(__atomic_exchange_n((UA *)p, (U)to_slot<T>(v), __ATOMIC_SEQ_CST));                \
    }
HL_EMU_ATOMIC_FLOAT(float, uint32_t)
HL_EMU_ATOMIC_FLOAT(double, uint64_t)
#undef HL_EMU_ATOMIC_FLOAT

}  // namespace hl_emu

#endif  // HIDET_LANG_EMULATOR_ATOMICS_H
