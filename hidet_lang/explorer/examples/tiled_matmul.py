import hidet_lang as hidet
from hidet_lang import attrs, f32, grid, i32, register_tensor, repeat

TILE = 16
tile = repeat(TILE, TILE)  # one worker visits every (i, j) of a tile

with hidet.script_module() as module:

    @hidet.script
    def matmul(m: i32, n: i32, k: i32, a: f32[m, k], b: f32[k, n], c: f32[m, n]):  # noqa: F821 (parameters)
        attrs.func_kind = "public"
        for ti, tj in grid((m + TILE - 1) // TILE, (n + TILE - 1) // TILE, attrs="p."):
            acc = register_tensor(f32, [TILE, TILE])
            for i, j in tile.on(0):
                acc[i, j] = 0.0
            for kk in range(k):
                for i, j in tile.on(0):
                    if ti * TILE + i < m and tj * TILE + j < n:
                        acc[i, j] += a[ti * TILE + i, kk] * b[kk, tj * TILE + j]
            for i, j in tile.on(0):
                if ti * TILE + i < m and tj * TILE + j < n:
                    c[ti * TILE + i, tj * TILE + j] = acc[i, j]
