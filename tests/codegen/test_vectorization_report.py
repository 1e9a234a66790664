"""The vectorization report of a CPU module (`CompiledModule.report()`, `toolchain.vectorization_report`): each loop
of the generated C at its DSL line, vectorized or why not, parallel or not; GCC for real, Clang on canned remarks."""

from __future__ import annotations

import inspect
import sys

import pytest

import hidet_lang as hidet
from codegen.toolchain.compiler import compiler_version, find_c_compiler
from codegen.toolchain.vectorization_report import (
    LoopReport,
    parse_clang_remarks,
    parse_gcc_remarks,
    plain_reason,
    report_loops,
)
from hidet_lang import attrs, f32, grid

N = 1024

with hidet.script_module() as loops_module:

    @hidet.script
    def launch(x: f32[N], y: f32[N], a: f32[N]):
        attrs.func_kind = "public"
        for i in range(N):  # LOOP: scaled
            y[i] = x[i] * 2.0
        for i in range(1, N):  # LOOP: recurrence
            a[i] = a[i - 1] * 0.5 + x[i]  # LOOP: recurrence body
        for i in grid(N, attrs="p"):  # LOOP: parallel
            y[i] = y[i] + 1.0


def dsl_line(tag: str) -> int:
    """The line of this file carrying the comment `# LOOP: <tag>`."""
    lines, _ = inspect.getsourcelines(sys.modules[__name__])
    return next(number for number, text in enumerate(lines, start=1) if text.rstrip().endswith(f"# LOOP: {tag}"))


@pytest.fixture(scope="module")
def report_by_line() -> dict[int, LoopReport]:
    """The report of `loops_module` built for the CPU, by DSL line (needs GCC: only it is installed here)."""
    if "clang" in compiler_version(find_c_compiler()).lower():
        pytest.skip("the report of a real build is checked with GCC")
    report = loops_module.build().report()
    assert len({loop.line for loop in report}) == len(report) == 3
    return {loop.line: loop for loop in report}


def test_vectorized_loop_at_its_dsl_line(report_by_line: dict[int, LoopReport]) -> None:
    loop = report_by_line[dsl_line("scaled")]
    assert loop.file == __file__ and loop.source == "for i in range(N):  # LOOP: scaled"
    assert loop.vectorized and loop.reason is None and not loop.parallel
    assert loop.vector_bytes is not None and loop.vector_bytes >= 16 and loop.lanes == loop.vector_bytes // 4
    assert loop.versioned_for_alias  # x and y may overlap: a run-time check picks the vector loop


def test_recurrence_is_not_vectorized_for_its_dependence(report_by_line: dict[int, LoopReport]) -> None:
    loop = report_by_line[dsl_line("recurrence")]
    assert not loop.vectorized and loop.vector_bytes is None
    assert loop.reason == f"a possible dependence between iterations at line {dsl_line('recurrence body')}"


def test_parallel_loop_is_reported_parallel(report_by_line: dict[int, LoopReport]) -> None:
    assert [line for line, loop in report_by_line.items() if loop.parallel] == [dsl_line("parallel")]
    assert report_by_line[dsl_line("parallel")].vectorized  # GCC names the outlined loop by its body's statement


def test_report_prints_one_line_per_loop_and_is_kept() -> None:
    module = loops_module.build()
    report = module.report()
    assert module.report() is report
    text = str(report).splitlines()
    assert len(text) == 3 and text[2].startswith(f"test_vectorization_report.py:{dsl_line('parallel')} ")
    assert "parallel (OpenMP); vectorized" in text[2] and "not vectorized: a possible dependence" in text[1]


def test_a_cuda_modules_report_is_its_cubins() -> None:
    from codegen.toolchain.cubin_report import CubinReport
    from hidet_lang.cuda import threadIdx

    with hidet.script_module() as cuda_module:

        @hidet.script
        def kernel(a: f32[32]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            a[threadIdx.x] = 1.0

    report = cuda_module.build(target="cuda:sm_80").report()
    assert isinstance(report, CubinReport) and [k.name for k in report] == ["kernel"]


# C as the emitter writes it, for the canned remarks below (markers name a file with no source text)
CANNED_C = """\
// k.py:3
void f(float * x, float * y) {
    // k.py:4
    for (int32_t i = 0; i < 1024; i++) {
        // k.py:5
        y[i] = expf(x[i]);
    }
    // k.py:6
    #pragma omp parallel for schedule(static)
    for (int32_t i_1 = 0; i_1 < 1024; i_1++) {
        // k.py:7
        for (int32_t j = 0; j < 8; j++) {
            // k.py:8
            y[j] = x[j];
        }
        // k.py:9
        for (int32_t j_1 = 0; j_1 < 8; j_1++) {
            // k.py:10
            y[j_1] = y[j_1] + x[i_1];
        }
    }
}
"""

CLANG_OUTPUT = """\
/r/m.c:6:16: remark: loop not vectorized: call instruction cannot be vectorized [-Rpass-analysis=loop-vectorize]
    6 |         y[i] = expf(x[i]);
      |                ^
/r/m.c:4:5: remark: loop not vectorized [-Rpass-missed=loop-vectorize]
/r/m.c:12:9: remark: vectorized loop (vectorization width: 8, interleaved count: 4) [-Rpass=loop-vectorize]
/r/m.c:17:9: remark: interleaved loop (interleaved count: 2) [-Rpass=loop-vectorize]
"""


def test_clang_remarks_on_canned_output() -> None:
    loops = report_loops(CANNED_C, parse_clang_remarks(CLANG_OUTPUT, "/r/m.c"))
    assert [(loop.line, loop.parallel, loop.vectorized) for loop in loops] == [
        (4, False, False), (6, True, False), (7, False, True), (9, False, False)]
    assert loops[0].reason == "a call with no vector version at line 5"
    assert loops[1].reason.startswith("the compiler did not analyze it")
    assert (loops[2].lanes, loops[2].vector_bytes) == (8, None)
    assert loops[3].reason.startswith("interleaved, not vectorized")
    assert str(loops[2]) == "k.py:7    vectorized, 8 lanes"


GCC_OUTPUT = """\

Analyzing loop at /r/m.c:12
/r/m.c:12:35: missed: couldn't vectorize loop
/r/m.c:12:35: missed: not vectorized: unsupported use in stmt.
Analyzing loop at /r/m.c:13
/r/m.c:13:20: missed: couldn't vectorize loop
/r/m.c:13:20: missed: not vectorized: loop nest containing two or more consecutive inner loops cannot be vectorized
/r/m.c:9:13: note: vectorized 0 loops in function.
Analyzing loop at /r/m.c:4
/r/m.c:6:20: missed:   failed: evolution of base is not affine.
/r/m.c:4:31: missed: couldn't vectorize loop
/r/m.c:6:16: missed: statement clobbers memory: _47 = expf (_44);
"""


def test_gcc_names_an_outlined_loop_by_a_statement_of_its_body() -> None:
    loops = report_loops(CANNED_C, parse_gcc_remarks(GCC_OUTPUT, "/r/m.c"))
    reasons = {loop.line: loop.reason for loop in loops}
    assert reasons[4] == "a call with no vector version (expf) at line 5"
    assert reasons[6] == "it holds several loops"  # named at line 13, in the inner loop GCC names by its own line
    assert reasons[7].startswith("a reduction it may not reorder")
    assert reasons[9].startswith("the compiler did not analyze it")


@pytest.mark.parametrize(("message", "words"), [
    ("not vectorized: control flow in loop.", "a conditional in the loop body"),
    ("not vectorized: latch block not empty.", "code between the exit test and the next iteration (latch block not "
                                               "empty)"),
    ("not vectorized: number of iterations cannot be computed.", "an iteration count it cannot compute before the "
                                                                  "loop"),
    ("not vectorized: something new for stmt: e_55 = _37 + 1;", "something new for stmt"),
    ("not vectorized: a novel reason.", "a novel reason"),
])
def test_plain_reason(message: str, words: str) -> None:
    assert plain_reason(message) == words
