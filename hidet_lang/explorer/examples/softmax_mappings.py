import math

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32, spatial
from hidet_lang.cuda import blockIdx, shfl_xor_sync, threadIdx

WARPS = 4
rows_of_block = spatial(WARPS, 32)  # warp w takes row w of the block's rows, lane l its columns l, l + 32, ...

with hidet.script_module() as module:

    @hidet.script
    def softmax(rows: i32, cols: i32, x: f32[rows, cols], y: f32[rows, cols]):  # noqa: F821 (parameters)
        attrs.cuda.block_dim = WARPS * 32
        attrs.cuda.grid_dim = (rows + WARPS - 1) // WARPS
        for w, lane in rows_of_block.on(threadIdx.x):
            row = blockIdx.x * WARPS + w
            if row < rows:
                top = -1.0e30
                for j in range(lane, cols, 32):
                    top = max(top, x[row, j])
                for offset in [16, 8, 4, 2, 1]:
                    top = max(top, shfl_xor_sync(0xFFFFFFFF, top, offset))
                total = 0.0
                for j in range(lane, cols, 32):
                    total += math.exp(x[row, j] - top)
                for offset in [16, 8, 4, 2, 1]:
                    total += shfl_xor_sync(0xFFFFFFFF, total, offset)
                for j in range(lane, cols, 32):
                    y[row, j] = math.exp(x[row, j] - top) / total
