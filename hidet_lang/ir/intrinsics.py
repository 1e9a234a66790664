"""Which intrinsics belong to which targets."""

# The operations on the vector types of CPU functions (`hidet_lang.cpu`), named `<type>_<operation>` (f32x8_load):
# what each computes is documented in `hidet_lang.frontend.vectors`, which builds them.
VECTOR_OPERATIONS = ("load", "load_aligned", "store", "store_aligned", "broadcast", "setzero", "fma", "exp", "max",
                     "min", "reduce_sum", "reduce_max", "reduce_min")
VECTOR_INTRINSICS = frozenset(f"f32x{lanes}_{op}" for lanes in (4, 8, 16) for op in VECTOR_OPERATIONS)

# Intrinsics only CUDA code can contain (the names the code generators see).
CUDA_INTRINSICS = frozenset({
    *(f"{v}.{d}" for v in ("threadIdx", "blockIdx", "blockDim", "gridDim") for d in "xyz"),
    "syncthreads", "syncthreads_and", "syncthreads_or", "syncthreads_count", "syncwarp",
    "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "ballot_sync", "any_sync", "all_sync",
    "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_exchange", "atomic_cas",
    "dynamic_shared_memory", "mma_m16n8k16_f16_f32", "ldmatrix_x4", "cp_async_4", "cp_async_8", "cp_async_16",
    "cp_async_commit_group", "cp_async_wait_group", "cp_async_wait_all",
})

# Intrinsics that make the threads of a block (or a warp) wait for each other.
SYNC_INTRINSICS = frozenset({
    "syncthreads", "syncthreads_and", "syncthreads_or", "syncthreads_count", "syncwarp", "shfl_sync",
    "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "ballot_sync", "any_sync", "all_sync",
    "mma_m16n8k16_f16_f32", "ldmatrix_x4",
})

# Intrinsics that do something besides computing their value: an expression holding one is never dropped.
EFFECTFUL_INTRINSICS = SYNC_INTRINSICS | frozenset({
    "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_exchange", "atomic_cas", "printf",
    "cp_async_4", "cp_async_8", "cp_async_16", "cp_async_commit_group", "cp_async_wait_group", "cp_async_wait_all",
    *(f"f32x{lanes}_{op}" for lanes in (4, 8, 16) for op in ("store", "store_aligned")),
})
