// hidet_lang CUDA launch limits, as the headers that check launches use them (cuda_launch.h, the emulator's).
//
// The values live in Python (hidet_lang/passes/cuda_limits.py, which the language's checks read too) and reach
// the compiler as defines (codegen.headers.cuda_limit_flags()):
//   HL_MAX_THREADS_PER_BLOCK                              threads a block may have
//   HL_MAX_BLOCK_DIM_X, HL_MAX_BLOCK_DIM_Y, HL_MAX_BLOCK_DIM_Z  each dimension of a block
//   HL_MAX_GRID_DIM_X, HL_MAX_GRID_DIM_Y, HL_MAX_GRID_DIM_Z     each dimension of a grid
//   HL_MAX_STATIC_SHARED_BYTES                            shared memory a block has before it must opt in to more
//   HL_MAX_CLUSTER_SIZE                                   blocks a thread block cluster may have
// This header only checks that they were given.
#pragma once
#ifndef HIDET_LANG_CUDA_LIMITS_H
#define HIDET_LANG_CUDA_LIMITS_H

#if !defined(HL_MAX_THREADS_PER_BLOCK) || !defined(HL_MAX_BLOCK_DIM_X) || !defined(HL_MAX_BLOCK_DIM_Y) || \
    !defined(HL_MAX_BLOCK_DIM_Z) || !defined(HL_MAX_GRID_DIM_X) || !defined(HL_MAX_GRID_DIM_Y) ||          \
    !defined(HL_MAX_GRID_DIM_Z) || !defined(HL_MAX_STATIC_SHARED_BYTES) || !defined(HL_MAX_CLUSTER_SIZE)
#error "the CUDA launch limits are compiler defines: build with codegen.headers.cuda_limit_flags()"
#endif

#endif  // HIDET_LANG_CUDA_LIMITS_H
