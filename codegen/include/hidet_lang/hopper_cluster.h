// hidet_lang CUDA primitives: thread block clusters (sm_90). Included by cuda_primitives.h after its own
// primitives; like it, one body for the GPU (inline PTX; a trap below sm_90) and one for the emulator
// (emulator_cluster.h, which runs a cluster's blocks together).
//   int hl_cluster_rank(void), hl_cluster_size(void): PTX %cluster_ctarank (the block's rank in its cluster, x
//   fastest) and %cluster_nctarank (its blocks); 0 and 1 in a launch without a cluster.
//   void hl_cluster_arrive(void), hl_cluster_wait(void): barrier.cluster.arrive.release and
//   barrier.cluster.wait.acquire: a thread arrives, then waits until every thread of the cluster that has not
//   exited has arrived; writes before the arrival are visible to the cluster's threads after their wait;
//   hl_cluster_sync(void): both.
//   T *hl_cluster_map_shared(T *p, int rank): mapa.u64: the shared-memory address `p` of this block at the same
//   offset in the block of rank `rank` (a generic address the thread may read and write).
//   void hl_mbarrier_arrive_cluster(uint64_t *bar, int rank): one arrival on the mbarrier at `bar`'s offset in the
//   block of rank `rank` (mapa.shared::cluster, then mbarrier.arrive.release.cluster.shared::cluster).
//   void hl_tma_load_multicast_<R>d(void *dst, const void *map, uint64_t *bar, int mask, int c0, ...):
//   cp.async.bulk.tensor.<R>d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster: the box
//   at c0... (innermost first) into `dst`'s offset of every block whose rank bit `mask` (16 bits) sets, completing
//   its bytes on each one's mbarrier at `bar`'s offset.
//   HL_CLUSTER_DIMS(x, y, z): a kernel's compile-time cluster shape: __cluster_dims__ from sm_90 (below, where
//   clusters do not exist, nothing: the cluster primitives trap there).
// The emulator's checking-mode variants hl_emu_<name>(where, ...) name the DSL line in their reports: a rank
// outside the cluster, a mask naming a block outside it, an address outside dynamic shared memory, a cluster
// barrier misused or never completed (a deadlock report of the cluster's blocks).
#pragma once
#ifndef HIDET_LANG_HOPPER_CLUSTER_H
#define HIDET_LANG_HOPPER_CLUSTER_H

#ifdef HIDET_LANG_EMULATOR
// ============================================================================================================
// Emulator bodies: the call site's line identifies the operation in reports.
#define HL_CLUSTER_DIMS(x, y, z)  // the launch passes the cluster's shape
#define hl_cluster_rank() ::hl_emu::cluster_rank()
#define hl_cluster_size() ::hl_emu::cluster_size()
#define hl_cluster_arrive() ::hl_emu::cluster_arrive(__LINE__, nullptr)
#define hl_cluster_wait() ::hl_emu::cluster_wait(__LINE__, nullptr)
#define hl_emu_cluster_arrive(where) ::hl_emu::cluster_arrive(__LINE__, (where))
#define hl_emu_cluster_wait(where) ::hl_emu::cluster_wait(__LINE__, (where))
#define hl_cluster_sync() (::hl_emu::cluster_arrive(__LINE__, nullptr), ::hl_emu::cluster_wait(__LINE__, nullptr))
#define hl_emu_cluster_sync(where) \
    (::hl_emu::cluster_arrive(__LINE__, (where)), ::hl_emu::cluster_wait(__LINE__, (where)))

template <class T>
static inline T *hl_emu_cluster_map_shared_at(int line, const char *where, T *p, int rank) {
    return (T *)::hl_emu::cluster_map(p, rank, line, where, "cluster_map_shared");
}
static inline void hl_emu_mbarrier_arrive_cluster_at(int line, const char *where, uint64_t *bar, int rank) {
    ::hl_emu::mbar_arrive(::hl_emu::cluster_map(bar, rank, line, where, "mbarrier_arrive_cluster"), 0, line, where);
}
#define hl_cluster_map_shared(p, rank) hl_emu_cluster_map_shared_at(__LINE__, nullptr, (p), (rank))
#define hl_emu_cluster_map_shared(where, p, rank) hl_emu_cluster_map_shared_at(__LINE__, (where), (p), (rank))
#define hl_mbarrier_arrive_cluster(bar, rank) hl_emu_mbarrier_arrive_cluster_at(__LINE__, nullptr, (bar), (rank))
#define hl_emu_mbarrier_arrive_cluster(where, bar, rank) \
    hl_emu_mbarrier_arrive_cluster_at(__LINE__, (where), (bar), (rank))

#define HL_EMU_MULTICAST(R, PARAMS, COORDS)                                                                    \
    static inline void hl_emu_tma_load_multicast_##R##d##_at(int line, const char *where, void *dst,           \
                                                             const void *map, uint64_t *bar, int mask, PARAMS) { \
        int c[R] = {COORDS};                                                                                  \
        ::hl_emu::tma_load_multicast(dst, map, bar, mask, R, c, line, where);                                 \
    }
#define HL_COMMA ,
HL_EMU_MULTICAST(2, int c0 HL_COMMA int c1, c0 HL_COMMA c1)
HL_EMU_MULTICAST(3, int c0 HL_COMMA int c1 HL_COMMA int c2, c0 HL_COMMA c1 HL_COMMA c2)
HL_EMU_MULTICAST(4, int c0 HL_COMMA int c1 HL_COMMA int c2 HL_COMMA int c3, c0 HL_COMMA c1 HL_COMMA c2 HL_COMMA c3)
HL_EMU_MULTICAST(5, int c0 HL_COMMA int c1 HL_COMMA int c2 HL_COMMA int c3 HL_COMMA int c4,
                 c0 HL_COMMA c1 HL_COMMA c2 HL_COMMA c3 HL_COMMA c4)
#undef HL_COMMA
#undef HL_EMU_MULTICAST
#define hl_tma_load_multicast_2d(...) hl_emu_tma_load_multicast_2d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_tma_load_multicast_3d(...) hl_emu_tma_load_multicast_3d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_tma_load_multicast_4d(...) hl_emu_tma_load_multicast_4d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_tma_load_multicast_5d(...) hl_emu_tma_load_multicast_5d_at(__LINE__, nullptr, __VA_ARGS__)
#define hl_emu_tma_load_multicast_2d(where, ...) hl_emu_tma_load_multicast_2d_at(__LINE__, (where), __VA_ARGS__)
#define hl_emu_tma_load_multicast_3d(where, ...) hl_emu_tma_load_multicast_3d_at(__LINE__, (where), __VA_ARGS__)
#define hl_emu_tma_load_multicast_4d(where, ...) hl_emu_tma_load_multicast_4d_at(__LINE__, (where), __VA_ARGS__)
#define hl_emu_tma_load_multicast_5d(where, ...) hl_emu_tma_load_multicast_5d_at(__LINE__, (where), __VA_ARGS__)

#else
// ============================================================================================================
// GPU bodies (NVRTC)
#define HL_CL_DEVICE static __device__ __forceinline__
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define HL_CL_SM90 1
#define HL_CLUSTER_DIMS(x, y, z) __cluster_dims__(x, y, z)
#else
#define HL_CL_SM90 0
#define HL_CLUSTER_DIMS(x, y, z)
#endif
#define HL_CL_SMEM(p) ((unsigned)__cvta_generic_to_shared(p))

HL_CL_DEVICE int hl_cluster_rank(void) {
    unsigned rank = 0;
#if HL_CL_SM90
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
#else
    __trap();
#endif
    return (int)rank;
}

HL_CL_DEVICE int hl_cluster_size(void) {
    unsigned size = 1;
#if HL_CL_SM90
    asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(size));
#else
    __trap();
#endif
    return (int)size;
}

HL_CL_DEVICE void hl_cluster_arrive(void) {
#if HL_CL_SM90
    asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
#else
    __trap();
#endif
}

HL_CL_DEVICE void hl_cluster_wait(void) {
#if HL_CL_SM90
    asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
#else
    __trap();
#endif
}

HL_CL_DEVICE void hl_cluster_sync(void) {
    hl_cluster_arrive();
    hl_cluster_wait();
}

template <class T>
HL_CL_DEVICE T *hl_cluster_map_shared(T *p, int rank) {
    T *q = p;
#if HL_CL_SM90
    asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(q) : "l"(p), "r"(rank));
#else
    __trap();
#endif
    return q;
}

HL_CL_DEVICE void hl_mbarrier_arrive_cluster(uint64_t *bar, int rank) {
#if HL_CL_SM90
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(HL_CL_SMEM(bar)), "r"(rank));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
#else
    __trap();
#endif
}

#if HL_CL_SM90
#define HL_MULTICAST(R, PARAMS, COORDS, OPERANDS)                                                               \
    HL_CL_DEVICE void hl_tma_load_multicast_##R##d(void *dst, const void *map, uint64_t *bar, int mask, PARAMS) { \
        asm volatile("cp.async.bulk.tensor." #R "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"      \
                     ".multicast::cluster [%0], [%1, {" COORDS "}], [%2], %3;\n" ::"r"(HL_CL_SMEM(dst)),          \
                     "l"(map), "r"(HL_CL_SMEM(bar)), "h"((unsigned short)mask), OPERANDS                        \
                     : "memory");                                                                               \
    }
#else
#define HL_MULTICAST(R, PARAMS, COORDS, OPERANDS)                                                               \
    HL_CL_DEVICE void hl_tma_load_multicast_##R##d(void *dst, const void *map, uint64_t *bar, int mask, PARAMS) { \
        __trap();                                                                                               \
    }
#endif
#define HL_COMMA ,
HL_MULTICAST(2, int c0 HL_COMMA int c1, "%4, %5", "r"(c0) HL_COMMA "r"(c1))
HL_MULTICAST(3, int c0 HL_COMMA int c1 HL_COMMA int c2, "%4, %5, %6", "r"(c0) HL_COMMA "r"(c1) HL_COMMA "r"(c2))
HL_MULTICAST(4, int c0 HL_COMMA int c1 HL_COMMA int c2 HL_COMMA int c3, "%4, %5, %6, %7",
             "r"(c0) HL_COMMA "r"(c1) HL_COMMA "r"(c2) HL_COMMA "r"(c3))
HL_MULTICAST(5, int c0 HL_COMMA int c1 HL_COMMA int c2 HL_COMMA int c3 HL_COMMA int c4, "%4, %5, %6, %7, %8",
             "r"(c0) HL_COMMA "r"(c1) HL_COMMA "r"(c2) HL_COMMA "r"(c3) HL_COMMA "r"(c4))
#undef HL_COMMA
#undef HL_MULTICAST
#undef HL_CL_SMEM
#undef HL_CL_SM90
#undef HL_CL_DEVICE
#endif  // HIDET_LANG_EMULATOR

#endif  // HIDET_LANG_HOPPER_CLUSTER_H
