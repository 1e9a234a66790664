"""The order in which the blocks of a tiled GEMM kernel (matmul, the implicit GEMM of conv2d) walk its output tiles.

Consecutive blocks run at about the same time, so the order decides what the L2 cache holds. Row by row, the blocks
of one tile row would share its rows of `a` but each read different columns of `b`, and a wide `b` would not stay
in L2. Instead the tile rows are taken in groups of `GROUP_M`, and a group is walked column by column: tile `t`
of a group is in the group's row `t % rows` and its column `t / rows` (`rows` is `GROUP_M`, or fewer for the last
group). Then the blocks running together cover a few tile rows and a few tile columns, sharing rows of `a` and
columns of `b` in L2. The groups follow one another, the last one holding the rows left over.

`grouped_tile` is a `cuda_internal` function (inlined where it is called) that writes the row and the column of a
tile through pointers, so that a kernel works out its tile's group once for both:

    tile_row: i32 = 0
    tile_col: i32 = 0
    grouped_tile(tile, tiles_m, tiles_n, ~tile_row, ~tile_col)
    m0 = tile_row * block_m

A kernel whose blocks each compute one `block_m x block_n` tile of one of several `m x n` outputs (batch entries,
convolution groups), the outputs outermost, launches `tile_blocks(m, n, block_m, block_n) * outputs` blocks and
finds its output and its tile's first row and column with `block_tile`:

    bi: i32 = 0
    m0: i32 = 0
    n0: i32 = 0
    block_tile(blockIdx.x, m, n, block_m, block_n, ~bi, ~m0, ~n0)
"""

from __future__ import annotations

from typing import Any

from hidet_lang import attrs, i32, script

GROUP_M = 8
"""Tile rows a group of consecutive blocks covers."""


@script
def grouped_tile(tile: i32, tiles_m: i32, tiles_n: i32, row: ~i32, col: ~i32):
    """Store the row and the column of the `tile`-th tile, in the grouped order over `tiles_m x tiles_n` tiles,
    at `row` and `col`."""
    attrs.func_kind = "cuda_internal"
    first_m = tile // (GROUP_M * tiles_n) * GROUP_M  # the group's first tile row
    group_m = min(tiles_m - first_m, GROUP_M)  # its tile rows: GROUP_M, fewer for the last group
    row[0] = first_m + tile % (GROUP_M * tiles_n) % group_m
    col[0] = tile % (GROUP_M * tiles_n) // group_m


def tile_blocks(m: Any, n: Any, block_m: int, block_n: int) -> Any:
    """The `block_m x block_n` tiles that cover an `m x n` output (ints, or IR while a kernel is parsed)."""
    return (n + block_n - 1) // block_n * ((m + block_m - 1) // block_m)


@script
def block_tile(block: i32, m: i32, n: i32, block_m: i32, block_n: i32, outer: ~i32, m0: ~i32, n0: ~i32):
    """Store which of the `m x n` outputs the `block`-th block works on at `outer`, and its tile's first row and
    column at `m0` and `n0`: the outputs one after the other, each output's `block_m x block_n` tiles in the
    grouped order (`grouped_tile`)."""
    attrs.func_kind = "cuda_internal"
    tiles_m = (m + block_m - 1) // block_m
    tiles_n = (n + block_n - 1) // block_n
    tiles = tiles_m * tiles_n
    tile_row: i32 = 0
    tile_col: i32 = 0
    grouped_tile(block % tiles, tiles_m, tiles_n, ~tile_row, ~tile_col)
    outer[0] = block // tiles
    m0[0] = tile_row * block_m
    n0[0] = tile_col * block_n
