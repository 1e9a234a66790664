// hidet_lang tensor maps, the host half: a launcher encodes the tensor map of each `TensorMap` parameter from the
// tensor it was given, before the launch (cuda_launch.h includes this after hl_launch_error).
//
// hl_encode_tensor_map(map, base, elem_bytes, rank, shape, box, swizzle, kernel, where): `shape` and `box` in the
// DSL's order (outermost dimension first) for a contiguous row-major tensor at `base`. It checks what the hardware
// requires (rank 2 to 5; a 16-byte aligned base; byte strides multiples of 16, so the innermost extent times the
// element size is a multiple of 16; box extents 1 to 256 with an innermost box of a multiple of 16 bytes, at most
// the swizzle's span when swizzled), recording a launch error at `where` otherwise (returns nonzero), then encodes:
// on a GPU with the driver's cuTensorMapEncodeTiled (zero fill out of bounds), whose entry point the binding hands
// over (hidet_lang_bind_tensor_maps), on the emulator into the emulator's map.
#pragma once
#ifndef HIDET_LANG_TENSOR_MAP_HOST_H
#define HIDET_LANG_TENSOR_MAP_HOST_H

#include "tensor_map.h"

#ifndef HIDET_LANG_EMULATOR
typedef int (*hl_cu_tensor_map_encode_tiled_t)(void *map, int data_type, unsigned rank, void *address,
                                                const unsigned long long *dims, const unsigned long long *strides,
                                                const unsigned *box, const unsigned *element_strides, int interleave,
                                                int swizzle, int l2_promotion, int oob_fill);
static hl_cu_tensor_map_encode_tiled_t hl_cu_tensor_map_encode_tiled = 0;

/* The driver's cuTensorMapEncodeTiled, for the launchers of kernels with tensor-map parameters. */
HL_EXPORT void hidet_lang_bind_tensor_maps(void *encode_tiled) {
    hl_cu_tensor_map_encode_tiled = (hl_cu_tensor_map_encode_tiled_t)encode_tiled;
}
#endif

static int hl_encode_tensor_map(hl_tensor_map *map, const void *base, int elem_bytes, int rank,
                                const long long *shape, const long long *box, int swizzle, const char *kernel,
                                const char *where) {
    long long dims[HL_TENSOR_MAP_MAX_RANK], strides[HL_TENSOR_MAP_MAX_RANK], boxes[HL_TENSOR_MAP_MAX_RANK];
    if (rank < 2 || rank > HL_TENSOR_MAP_MAX_RANK) {
        hl_launch_error(-1, kernel, where, "a tensor map has 2 to 5 dimensions, not %d", rank);
        return 1;
    }
    if ((uintptr_t)base % 16 != 0) {
        hl_launch_error(-1, kernel, where, "a tensor map's tensor must be 16-byte aligned (it is at %p)", base);
        return 1;
    }
    for (int d = 0; d < rank; d++) {
        dims[d] = shape[rank - 1 - d];
        boxes[d] = box[rank - 1 - d];
        strides[d] = d == 0 ? elem_bytes : strides[d - 1] * dims[d - 1];
        if (dims[d] < 1 || dims[d] > (1LL << 32)) {
            hl_launch_error(-1, kernel, where, "a tensor map's extent %lld is outside [1, 2^32]", dims[d]);
            return 1;
        }
        if (boxes[d] < 1 || boxes[d] > 256) {
            hl_launch_error(-1, kernel, where, "a tensor map's box extent %lld is outside [1, 256]", boxes[d]);
            return 1;
        }
    }
    if (strides[rank - 1] >= (1LL << 40) || (rank > 1 && strides[1] % 16 != 0)) {
        hl_launch_error(-1, kernel, where, "a tensor map's row of %lld elements is %lld bytes: TMA needs the byte "
                        "strides to be multiples of 16 (below 2^40)", dims[0], strides[1]);
        return 1;
    }
    long long inner = boxes[0] * elem_bytes;
    if (inner % 16 != 0 || (swizzle && inner > swizzle)) {
        hl_launch_error(-1, kernel, where, "a tensor map's innermost box is %lld bytes: it must be a multiple of 16%s",
                        inner, swizzle ? " and at most the swizzle's span" : "");
        return 1;
    }
#ifdef HIDET_LANG_EMULATOR
    memset(map, 0, sizeof *map);
    map->magic = HL_TENSOR_MAP_MAGIC;
    map->rank = rank;
    map->elem_bytes = elem_bytes;
    map->swizzle = swizzle;
    map->base = base;
    for (int d = 0; d < rank; d++) {
        map->dims[d] = dims[d];
        map->strides[d] = strides[d];
        map->box[d] = (uint32_t)boxes[d];
    }
    return 0;
#else
    if (!hl_cu_tensor_map_encode_tiled) {
        hl_launch_error(-3, kernel, where, "the driver has no cuTensorMapEncodeTiled (CUDA 12 or later needed)");
        return 1;
    }
    unsigned long long gdims[HL_TENSOR_MAP_MAX_RANK], gstrides[HL_TENSOR_MAP_MAX_RANK];
    unsigned boxdims[HL_TENSOR_MAP_MAX_RANK], ones[HL_TENSOR_MAP_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        gdims[d] = (unsigned long long)dims[d];
        gstrides[d] = d + 1 < rank ? (unsigned long long)strides[d + 1] : 0;
        boxdims[d] = (unsigned)boxes[d];
        ones[d] = 1;
    }
    /* data types by size (a copy moves bits): UINT8 0, UINT16 1, UINT32 2, UINT64 4; swizzle enum 0-3 */
    int data_type = elem_bytes == 1 ? 0 : elem_bytes == 2 ? 1 : elem_bytes == 4 ? 2 : 4;
    int swizzle_mode = swizzle == 32 ? 1 : swizzle == 64 ? 2 : swizzle == 128 ? 3 : 0;
    int rc = hl_cu_tensor_map_encode_tiled(map, data_type, (unsigned)rank, (void *)base, gdims, gstrides, boxdims,
                                           ones, 0, swizzle_mode, 2 /* L2 promotion 128B */, 0 /* zero fill */);
    if (rc != 0) {
        hl_launch_error(rc, kernel, where, "cuTensorMapEncodeTiled failed (driver error %d)", rc);
        return 1;
    }
    return 0;
#endif
}

#endif  // HIDET_LANG_TENSOR_MAP_HOST_H
