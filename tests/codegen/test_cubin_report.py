"""The report of a CUDA module's cubin (`CompiledModule.report()`): what it says of small kernels against facts
known from their source (shared arrays, dynamic shared memory, local arrays, spills under a launch bound), the
occupancy arithmetic against hand-computed points per architecture and a brute-force search, the SASS opcode
counts of the library's CUDA templates, and what it says without NVRTC or a disassembler. NVRTC compiles for any
architecture here; no GPU is needed."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.toolchain import sass
from codegen.toolchain.cubin_info import kernel_resources, read_attributes
from codegen.toolchain.cubin_report import CubinReport, KernelLaunch, cubin_report, cuda_module_report
from codegen.toolchain.errors import CudaToolkitMissingError
from codegen.toolchain.headers import INCLUDE_DIR
from codegen.toolchain.nvrtc import compile_cubin
from codegen.toolchain.occupancy import max_threads_per_block, occupancy, sm_limits
from codegen.toolchain.ptxas_log import parse_ptxas_log, ptxas_log
from hidet_lang import attrs, f32, i32, register_tensor
from hidet_lang.cuda import blockIdx, shared_tensor, syncthreads, threadIdx
from hidet_lang.testing import example_count

needs_disassembler = pytest.mark.skipif(sass.disassembler() is None, reason=sass.SASS_TOOLS_MISSING)


def shared_array_module(elements: int, dynamic_smem: int):
    """One kernel of 128 threads with a static shared array of `elements` floats and `dynamic_smem` bytes of
    dynamic shared memory."""
    with hidet.script_module() as module:

        @hidet.script
        def staged(out: f32[128]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 128
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = dynamic_smem
            s = shared_tensor(f32, [elements])
            s[threadIdx.x % elements] = f32(threadIdx.x)
            syncthreads()
            out[threadIdx.x] = s[(127 - threadIdx.x) % elements]

    return module


with hidet.script_module() as launch_set_module:

    @hidet.script
    def sized_at_launch(out: f32[1024], n: i32, smem: i32):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = n
        attrs.cuda.grid_dim = 1
        attrs.cuda.dynamic_smem_bytes = smem
        out[threadIdx.x] = 1.0

    @hidet.script
    def local_array(out: f32[64], n: i32):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 2
        buf = register_tensor(f32, [1000])
        for i in range(n):
            buf[i % 1000] = f32(i + threadIdx.x)
        out[blockIdx.x * 32 + threadIdx.x] = buf[n % 1000]


# 64 live values, each read at 64 places, under a bound of 1024 threads a block: at most 64 registers a thread
SPILLING_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(1024) spills(float* out, int n) {
    float buf[64];
    #pragma unroll
    for (int i = 0; i < 64; i++) buf[i] = out[i * n + threadIdx.x];
    float acc = 0;
    #pragma unroll
    for (int j = 0; j < 64; j++)
        #pragma unroll
        for (int i = 0; i < 64; i++) acc += buf[i] * buf[(i * j) % 64];
    out[threadIdx.x] = acc;
}
"""


# ----------------------------------------------------------------------------------------------------
# Small kernels against what their source says


@settings(max_examples=example_count(3), deadline=None)
@given(elements=st.integers(1, 4000), dynamic_smem=st.integers(0, 20000))
def test_static_and_dynamic_shared_memory_are_what_the_kernel_declares(elements: int, dynamic_smem: int) -> None:
    kernel = shared_array_module(elements, dynamic_smem).build(target="cuda:sm_80").report().kernel("staged")
    assert (kernel.static_smem, kernel.dynamic_smem, kernel.threads_per_block) == (4 * elements, dynamic_smem, 128)
    assert kernel.local_bytes == 0 and kernel.spill_store_bytes == 0 and kernel.spill_load_bytes == 0
    expected = occupancy("sm_80", kernel.registers, 128, 4 * elements + dynamic_smem)
    assert kernel.occupancy == expected


def test_on_sm_90_the_static_size_counts_the_reserved_kilobyte_once() -> None:
    report = shared_array_module(300, 1000).build(target="cuda:sm_90").report()
    kernel = report.kernel("staged")
    assert kernel.static_smem == 1200 + 1024
    assert any("reserves" in note for note in report.notes)
    # 2224 + 1000 bytes rounded to 3328: 70 blocks of shared memory fit in 228 KB, more than the 16 of threads
    assert kernel.occupancy == occupancy("sm_90", kernel.registers, 128, 2224 + 1000, reserved_included=True)
    assert kernel.occupancy.blocks_per_sm == 16 and kernel.occupancy.limited_by == ("threads",)


def test_a_local_array_is_local_memory_not_spills_and_launch_set_sizes_are_noted() -> None:
    module = launch_set_module.build(target="cuda:sm_80")
    report = module.report()
    assert report is module.report()  # made once
    local = report.kernel("local_array")
    assert local.local_bytes == 4000 and (local.spill_store_bytes, local.spill_load_bytes) == (0, 0)
    assert local.static_smem == 0 and local.threads_per_block == 32 and local.max_threads_per_block == 32
    at_launch = report.kernel("sized_at_launch")
    assert at_launch.dynamic_smem is None
    # a block size from an argument: no launch bound in the cubin either, so no occupancy, and a note says why
    assert at_launch.threads_per_block is None and at_launch.occupancy is None
    assert "sized_at_launch: its block size is set at launch and has no launch bound; no occupancy" in report.notes
    assert "sized_at_launch: its dynamic shared memory is set at launch; the occupancy counts none" in report.notes


def test_spills_under_a_launch_bound_are_reported() -> None:
    cubin = compile_cubin(SPILLING_SOURCE, "sm_80")
    report = cubin_report(cubin, "sm_80", ptxas=ptxas_log(SPILLING_SOURCE, "sm_80"))
    kernel = report.kernel("spills")
    assert kernel.registers <= 64 and kernel.max_threads_per_block == 1024
    assert kernel.spill_store_bytes > 0 and kernel.spill_load_bytes > 0 and kernel.local_bytes > 0
    assert kernel.threads_per_block == 1024 and kernel.occupancy.warps_per_sm == 32  # one block of 32 warps


def test_the_table_prints_every_kernel_and_column() -> None:
    text = str(launch_set_module.build(target="cuda:sm_80").report())
    lines = text.splitlines()
    assert lines[0] == "CUDA kernels for sm_80"
    for column in ("kernel", "regs", "spill st/ld B", "local B", "smem static B", "smem dyn B", "threads",
                   "max threads", "blocks/SM", "warps/SM", "occupancy", "limited by"):
        assert column in lines[1]
    assert lines[2].startswith("sized_at_launch") or lines[3].startswith("sized_at_launch")
    assert any(line.startswith("local_array ") and " 4000 " in line for line in lines)


# ----------------------------------------------------------------------------------------------------
# Occupancy


@pytest.mark.parametrize(
    ("arch", "registers", "threads", "smem", "blocks", "warps", "limited_by"),
    [
        # 32 regs: 1024 a warp, 16 warps a sub-partition, 64 an SM = 8 blocks of 8 warps; 2048 threads = 8 blocks
        ("sm_80", 32, 256, 0, 8, 64, ("registers", "threads")),
        # 95 regs: 3040 rounded to 3072 a warp, 5 warps a sub-partition = 20 warps = 5 blocks of 4 warps
        ("sm_80", 95, 128, 4096, 5, 20, ("registers",)),
        # 48 KB + 1 KB reserved = 50176 bytes; 164 KB holds 3 of them
        ("sm_80", 16, 64, 48 * 1024, 3, 6, ("shared memory",)),
        ("sm_80", 16, 64, 163 * 1024, 1, 2, ("shared memory",)),
        ("sm_80", 16, 64, 163 * 1024 + 1, 0, 0, ("shared memory",)),
        ("sm_80", 256, 32, 0, 0, 0, ("registers",)),
        # sm_86: 1536 threads (48 warps) = 6 blocks of 8 warps; its 16-block limit does not bind
        ("sm_86", 32, 256, 0, 6, 48, ("threads",)),
        ("sm_86", 16, 32, 0, 16, 16, ("blocks",)),
        ("sm_89", 16, 32, 0, 24, 24, ("blocks",)),
        # sm_89: 100 KB an SM; 40 KB + 1 KB = 41984 bytes: 2 blocks
        ("sm_89", 32, 128, 40 * 1024, 2, 8, ("shared memory",)),
        # 128 regs: 4096 a warp, 4 a sub-partition = 16 warps: one block of 12 warps
        ("sm_90a", 128, 384, 100 * 1024, 1, 12, ("registers",)),
        ("sm_90", 32, 128, 227 * 1024, 1, 4, ("shared memory",)),
        ("sm_90", 32, 128, 227 * 1024 + 1, 0, 0, ("shared memory",)),
        ("sm_90", 16, 32, 0, 32, 32, ("blocks",)),
        # 56 regs: 1792 a warp, 9 warps a sub-partition = 36 warps: 1 block of 32 warps (threads allow 2)
        ("sm_90", 56, 1024, 0, 1, 32, ("registers",)),
    ],
)
def test_occupancy_at_hand_computed_points(arch: str, registers: int, threads: int, smem: int, blocks: int,
                                           warps: int, limited_by: tuple[str, ...]) -> None:
    result = occupancy(arch, registers, threads, smem)
    assert (result.blocks_per_sm, result.warps_per_sm, result.limited_by) == (blocks, warps, limited_by)
    assert result.fraction == warps / sm_limits(arch).max_warps


def test_the_reserved_kilobyte_counted_in_the_static_size_is_not_added_again() -> None:
    # 2224 rounded to 2304: 101 blocks' worth of 228 KB; adding the kilobyte again: 3328 bytes, 70 blocks
    assert occupancy("sm_90", 16, 32, 2224, reserved_included=True).limited_by == ("blocks",)
    assert sm_limits("sm_90").shared_bytes // 2304 == 101 and sm_limits("sm_90").shared_bytes // 3328 == 70


def test_max_threads_per_block() -> None:
    assert max_threads_per_block("sm_80", 255) == 256  # 8192 registers a warp: 2 warps a sub-partition
    assert max_threads_per_block("sm_80", 64) == 1024
    assert max_threads_per_block("sm_80", 128) == 512
    assert max_threads_per_block("sm_90", 32, launch_bound=96) == 96
    assert max_threads_per_block("sm_90", 256) == 0


def test_occupancy_refuses_an_impossible_block() -> None:
    with pytest.raises(ValueError, match="1 to 1024 threads"):
        occupancy("sm_80", 32, 1025, 0)
    with pytest.raises(ValueError, match="oldest architecture known is sm_75"):
        sm_limits("sm_70")


@settings(max_examples=example_count(200), deadline=None)
@given(arch=st.sampled_from(["sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120"]),
       registers=st.integers(1, 255), threads=st.integers(1, 1024), smem=st.integers(0, 240 * 1024))
def test_occupancy_is_the_most_blocks_that_fit(arch: str, registers: int, threads: int, smem: int) -> None:
    limits = sm_limits(arch)
    warps = -(-threads // 32)
    registers_a_warp = -(-registers * 32 // 256) * 256
    block_smem = -(-(smem + limits.reserved_per_block) // 128) * 128

    def fits(blocks: int) -> bool:
        # each warp lives in one sub-partition's quarter of the register file
        per_quarter = -(-blocks * warps // limits.sub_partitions)
        return (blocks <= limits.max_blocks and blocks * warps * 32 <= limits.max_threads
                and per_quarter <= (limits.registers // limits.sub_partitions) // registers_a_warp
                and smem <= limits.shared_per_block and blocks * block_smem <= limits.shared_bytes)

    most = max((b for b in range(limits.max_blocks + 1) if fits(b)), default=0)
    result = occupancy(arch, registers, threads, smem)
    assert result.blocks_per_sm == most
    assert result.warps_per_sm == result.blocks_per_sm * warps <= limits.max_warps


# ----------------------------------------------------------------------------------------------------
# The cubin, the ptxas log and the SASS listing, read


def test_a_cubin_without_kernels_and_malformed_attributes() -> None:
    assert kernel_resources(compile_cubin("__device__ int unused;", "sm_80")) == {}
    with pytest.raises(ValueError, match="not a little-endian 64-bit ELF"):
        kernel_resources(b"not an ELF image")
    with pytest.raises(ValueError, match="runs past its section's end"):
        read_attributes(bytes([4, 0x2F, 8, 0, 1, 2, 3]))
    assert read_attributes(bytes([3, 0x1B, 0xFF, 0, 2, 0x4C, 1, 0])) == [(0x1B, 255), (0x4C, 1)]


def test_ptxas_log_is_parsed_per_function() -> None:
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
           "ptxas info    : Function properties for k\n"
           "ptxas         .     896 bytes stack frame, 940 bytes spill stores, 1980 bytes spill loads\n"
           "ptxas info    : Used 64 registers, used 0 barriers, 896 bytes cumulative stack size\n"
           "ptxas info    : Function properties for helper\n"
           "    ptxas         .     8 bytes stack frame, 0 bytes spill stores, 4 bytes spill loads\n")
    parsed = parse_ptxas_log(log)
    assert (parsed["k"].frame_bytes, parsed["k"].spill_store_bytes, parsed["k"].spill_load_bytes) == (896, 940, 1980)
    assert parsed["helper"].spill_load_bytes == 4


NVDISASM_LISTING = """\
//--------------------- .text.first            --------------------------
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/               @P0 HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0020*/              @!UPT LDGSTS.E.BYPASS.128 [R2], desc[UR4][R6.64] ;
        /*0030*/                   NOP ;
        /*0040*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0050*/                   EXIT ;
        /*0060*/                   BRA `(.L_x_0) ;
        /*0070*/                   NOP;
        /*0080*/                   NOP;
//--------------------- .text.second           --------------------------
        /*0000*/                   LDSM.16.M88.4 R4, [R2] ;
"""

CUOBJDUMP_LISTING = """\
        Function : second
        .headerflags    @"EF_CUDA_SM80 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM80)"
        /*0000*/                   LDSM.16.M88.4 R4, [R2] ;          /* 0x000000000204783b */
                                                                      /* 0x000e240000000200 */
        /*0010*/                   EXIT ;                            /* 0x000000000000794d */
"""


def test_opcodes_are_counted_without_modifiers_predicates_or_trailing_padding() -> None:
    counts = sass.opcode_counts(NVDISASM_LISTING)
    assert counts["first"] == Counter({"HMMA": 2, "LDC": 1, "LDGSTS": 1, "NOP": 1, "EXIT": 1, "BRA": 1})
    assert counts["second"] == Counter({"LDSM": 1})
    assert sass.opcode_counts(CUOBJDUMP_LISTING) == {"second": Counter({"LDSM": 1, "EXIT": 1})}


LOOPS_LISTING = """\
//--------------------- .text.looping          --------------------------
        /*0000*/                   S2R R0, SR_TID.X ;
.L_x_0:
        /*0010*/                   LDS R2, [R0] ;
.L_x_1:
        /*0020*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0030*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0040*/               @P0 BRA `(.L_x_1) ;
        /*0050*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0060*/               @P1 BRA `(.L_x_0) ;
.L_x_2:
        /*0070*/                   SYNCS.PHASECHK.TRANS64 P2, [R0], RZ ;
        /*0080*/              @!P2 BRA `(.L_x_2) ;
        /*0090*/                   BRA `(.L_x_3) ;
.L_x_3:
        /*00a0*/                   EXIT ;
//--------------------- .text.plain           --------------------------
.L_x_4:
        /*0000*/                   FFMA R1, R2, R3, R1 ;
        /*0010*/               @P0 BRA `(.L_x_4) ;
        /*0020*/                   EXIT ;
"""

CUOBJDUMP_LOOP = """\
        Function : looping
        /*0000*/                   S2R R0, SR_TID.X ;                /* 0x0000000000007919 */
        /*0010*/                   HGMMA.64x128x16.F32 R24, gdesc[UR4], R24 ;  /* 0x00000000001879f0 */
        /*0020*/                   FMUL R1, R2, R3 ;                 /* 0x0000000000017220 */
        /*0030*/               @P0 BRA 0x10 ;                        /* 0x0000000000000947 */
        /*0040*/                   EXIT ;                            /* 0x000000000000794d */
"""


def test_the_main_loop_is_the_one_issuing_most_tensor_core_work_innermost_first() -> None:
    loops = sass.main_loops(LOOPS_LISTING)
    # the inner loop (0x20-0x40) and the outer one (0x10-0x60) both issue the two HMMA: the inner one is the main
    # loop; the barrier's wait loop and the forward branch are not; a loop without tensor-core work is no main loop
    assert loops["looping"] == sass.MainLoop(instructions=3, tensor_core=2)
    assert loops["looping"].tensor_core_share == 2 / 3
    assert loops["plain"] is None
    assert sass.main_loops(CUOBJDUMP_LOOP) == {"looping": sass.MainLoop(instructions=3, tensor_core=1)}


# ----------------------------------------------------------------------------------------------------
# Without NVRTC, without a disassembler


def test_without_nvrtc_the_report_says_so() -> None:
    def no_nvrtc() -> bytes:
        raise CudaToolkitMissingError("the NVRTC library could not be loaded (package nvidia-cuda-nvrtc)")

    report = cuda_module_report("", no_nvrtc, "sm_80", {})
    assert len(report) == 0
    assert "no cubin to report on: the NVRTC library could not be loaded" in str(report)
    assert "(no kernels)" in str(report)


def test_without_a_disassembler_the_report_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sass, "disassembler", lambda: None)
    module = shared_array_module(16, 0)
    built = module.build(target="cuda:sm_80")
    report = cuda_module_report(built.source("cuda"), lambda: built.cubin, "sm_80",
                                {"staged": KernelLaunch(threads=128)},
                                include_dirs=[str(INCLUDE_DIR)])
    assert report.kernel("staged").opcodes is None and report.kernel("staged").static_smem == 64
    assert "SASS opcodes" not in str(report) and sass.SASS_TOOLS_MISSING in str(report)


def test_combined_reports_name_each_kernel_by_its_title() -> None:
    report = launch_set_module.build(target="cuda:sm_80").report()
    single = shared_array_module(8, 0).build(target="cuda:sm_80").report()
    combined = CubinReport.combine("sm_80", [("two", report), ("one", single)])
    assert sorted(k.name for k in combined) == ["one", "two: local_array", "two: sized_at_launch"]
    assert len(combined.notes) == len(set(combined.notes))


# ----------------------------------------------------------------------------------------------------
# The library's CUDA templates, built for sm_80


@needs_disassembler
def test_the_f16_tensor_core_matmul_issues_hmma_and_ldsm() -> None:
    from stdlib_ops.templates.kernels.matmul_cuda_f16_mma import matmul_cuda_f16_mma

    kernel = matmul_cuda_f16_mma(1, 64, 64, 64).build(target="cuda:sm_80").report().kernel("matmul")
    assert kernel.opcodes["HMMA"] > 0 and kernel.opcodes["LDSM"] > 0
    assert kernel.spill_store_bytes == 0 and kernel.spill_load_bytes == 0


@needs_disassembler
def test_the_f32_cp_async_matmul_issues_ldgsts() -> None:
    from stdlib_ops.templates.kernels.matmul_cuda import matmul_cuda

    kernel = matmul_cuda("b", "m", "n", "k", "float32").build(target="cuda:sm_80").report().kernel("matmul")
    assert kernel.opcodes["LDGSTS"] > 0 and kernel.opcodes["FFMA"] > 0
    assert kernel.opcodes["HMMA"] == 0
