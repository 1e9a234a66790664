// hidet_lang tensor maps: the 128-byte descriptor of a tiled view of a global tensor that TMA copies read.
// On the GPU it is the driver's CUtensorMap, opaque here (encoded by the host with cuTensorMapEncodeTiled and
// passed as a `const __grid_constant__` kernel parameter); on the emulator it holds what emulator_tma.h copies
// with, every per-dimension field innermost dimension first. Included by the device source (NVRTC or the
// emulator's C++) and by the host source (C for a GPU), so it is C.
#pragma once
#ifndef HIDET_LANG_TENSOR_MAP_H
#define HIDET_LANG_TENSOR_MAP_H

#define HL_TENSOR_MAP_MAX_RANK 5
#define HL_TENSOR_MAP_MAGIC 0x544d4150u

#if defined(HIDET_LANG_EMULATOR)
typedef struct __attribute__((aligned(64))) {
    uint32_t magic;      /* HL_TENSOR_MAP_MAGIC once encoded */
    int32_t rank;        /* 2 to 5 */
    int32_t elem_bytes;  /* 1, 2, 4 or 8 */
    int32_t swizzle;     /* 0, 32, 64 or 128 bytes */
    const void *base;    /* the tensor's first element */
    long long dims[HL_TENSOR_MAP_MAX_RANK];    /* extents */
    long long strides[HL_TENSOR_MAP_MAX_RANK]; /* in bytes */
    uint32_t box[HL_TENSOR_MAP_MAX_RANK];      /* the box a copy moves */
} hl_tensor_map;
#elif defined(__CUDACC_RTC__)
typedef struct __align__(64) { unsigned long long opaque[16]; } hl_tensor_map;
#else
typedef struct { _Alignas(64) unsigned long long opaque[16]; } hl_tensor_map;
#endif

#endif  // HIDET_LANG_TENSOR_MAP_H
