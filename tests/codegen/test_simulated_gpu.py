"""The GPU path, end to end, on the simulated GPU of `simulated_gpu/` (the real cuda-python bindings and NVRTC
cubins, a stand-in driver, kernels run by the emulator): the test files that build for CUDA and exercise the host's
side of a GPU (the code generator's and the runtime's tests, graphs, tuning, the templates with host work of their
own, the examples), through the GPU's launchers and argument staging, but those whose subject is what kernels compute
(`NOT_RERUN`: the emulator computes it there too) and the tests parametrized to run on the CPU;
`examples/gpu_check.py`, which runs the GPU-marked tests; and the driver-level scenarios of
`simulated_gpu/simulated_scenarios.py`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIMULATED = Path(__file__).resolve().parent / "simulated_gpu"
sys.path.insert(0, str(SIMULATED))

from simulated_driver import environment  # noqa: E402


@pytest.fixture(scope="module")
def driver_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("simulated_driver")


RUN_LIMIT_S = 1800  # the suite but its fuzzing on a cold compilation cache (a fresh checkout) on 2 cores: ~10 min


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_LIMIT_S)
    failures = "\n".join(line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR")))
    assert done.returncode == 0, failures + "\n" + done.stdout[-4000:] + done.stderr[-4000:]
    return done


def passed_without_skips(output: str) -> int:
    """The number of tests a pytest run reports passed; fails when any was skipped, failed or errored."""
    summary = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|error)", line)][-1]
    assert not re.search(r"skipped|failed|error", summary), summary
    return int(re.search(r"(\d+) passed", summary).group(1))


# The only reasons a test may be skipped on the (simulated) GPU: it checks something only the emulator does (or
# needs torch, an optional package).
ALLOWED_SKIPS = {
    "on a GPU the limit is the device's",
    "the planted bugs are the emulator's to catch",
    "the fast path is the emulator's",
    "the fast path is the emulator's, outside checking mode",
    "the emulator's checking mode",
    "the emulator's report of a partial warp",
    "the checking mode is the emulator's",
    "the emulator's stack limit",
    "built modules run the emulator only where there is no GPU",
    "the emulator's refusal of inline PTX; CUDA modules build for a GPU here",
    "inline PTX runs on a real GPU only (the simulated GPU runs kernels on the emulator)",
    "the emulator's runs; CUDA modules build for a GPU here",
    "torch is not a dependency; the DLPack path is also tested above",  # only where torch is not installed
    "torch is not a dependency; .torch() needs it",  # likewise
    "this torch has no CUDA: it cannot make the CUDA tensors the test passes",  # a CPU-only torch beside a GPU
    # the misaligned-argument paths of the vectorized kernels: on a GPU a call stages numpy arguments in aligned
    # device memory, so only the emulator sees them as they are
    "a GPU call copies numpy arguments to aligned device memory",
    "a GPU call copies numpy arguments to aligned device memory; the emulator takes them as they are",
}


# The differential fuzz tests are about the arithmetic of the targets, not the GPU path (and the longest to build);
# the model importers' tests are about converting models (compiled graphs on the GPU path are the graph tests');
# the elementwise and drawn-shape operator tables are about the operators' results: their kernels come from the
# schedules and templates that the template, graph (symbolic sizes included) and other operator tests launch there;
# the README's blocks run with the emulator forced, so a second run would repeat the first; the tests of the
# intrinsics' and the emulator's own semantics, and of the machine code NVRTC makes, compute on the same emulator (or
# read the same cubins) there, so a second run repeats them too: the launch path they share is every other test's
NOT_RERUN = ("tests/hidet_lang/test_fuzz_programs.py", "tests/hidet_lang/test_fuzz_frontend.py",
             "tests/stdlib_ops/frontends", "tests/stdlib_ops/operators/test_ops_elementwise.py",
             "tests/stdlib_ops/operators/test_ops_drawn_shapes.py", "tests/test_readme.py",
             "tests/codegen/test_intrinsic_table.py", "tests/codegen/test_hopper_wgmma.py",
             "tests/codegen/test_tensor_core_primitives.py", "tests/codegen/test_tensor_core_tf32.py",
             "tests/codegen/test_tensor_core_trans_bf16.py", "tests/codegen/test_cubin_report.py",
             "tests/codegen/test_emulator_checks.py", "tests/codegen/test_emulator_fast_path.py",
             "tests/codegen/test_emulator_memory_maps.py", "tests/codegen/test_emulator_runtime.py",
             "tests/stdlib_ops/templates/test_matmul_cuda_sass.py", "tests/stdlib_ops/test_schedule_linear_work.py",
             # what kernels compute (the language's programs, the operators' results, the templates without host
             # work of their own: the emulator computes them there too); the templates with host work of their own
             # (tensor maps, opt-in shared memory, GPU-marked tests) stay
             "tests/hidet_lang", "tests/stdlib_ops/operators",
             "tests/stdlib_ops/templates/test_template_matmul_cuda.py",
             "tests/stdlib_ops/templates/test_template_attention_cuda.py",
             "tests/stdlib_ops/templates/test_template_attention_cuda_mma.py",
             "tests/stdlib_ops/templates/test_template_rows_cuda.py",
             "tests/stdlib_ops/templates/test_template_reduction_cuda.py",
             "tests/stdlib_ops/templates/test_template_softmax_columns_cuda.py",
             "tests/stdlib_ops/templates/test_template_conv2d_cuda.py",
             "tests/stdlib_ops/templates/test_template_attention_decode_cuda.py",
             "tests/stdlib_ops/test_schedule_pooling_cuda.py",
             # the Hopper attention's tensor maps are encoded and launched by the code the Hopper matmul's tests take
             "tests/stdlib_ops/templates/test_template_attention_cuda_sm90.py",
             # the explorer's pages: its child processes build and run through the paths the tests above take
             "tests/explorer",
             # the fuzzers' findings and the float-to-integer conversions are about the targets' arithmetic (as the
             # fuzz tests); the attention rewrite is a graph transformation whose kernels the attention and graph
             # tests launch there
             "tests/codegen/test_fuzz_findings.py", "tests/codegen/test_float_to_int.py",
             "tests/stdlib_ops/graph/test_rewrite_attention.py",
             # the emulator's precompiled header is the C++ compiler's business, the same on either path
             "tests/codegen/test_precompiled_headers.py",
             # gpu_ops.py's guards and builds run with the emulator forced, and the GPU window's rehearsal sets up a
             # simulated GPU of its own: a second run would repeat them
             "tests/examples/test_gpu_ops.py", "tests/examples/test_gpu_window.py",
             # the emulator's runtime object and the C compiler are the same on either path
             "tests/codegen/test_emulator_runtime_object.py", "tests/codegen/test_compiler.py",
             # the tile layer's pieces alone and the row templates' vector paths: what kernels compute (as the
             # intrinsics' tests above); the profile's counts are the emulator's own (a profile opens only there)
             "tests/codegen/test_hopper_tiles.py", "tests/codegen/test_sm80_tiles.py",
             "tests/stdlib_ops/templates/test_template_row_vectors_cuda.py",
             "tests/codegen/test_emulator_profile.py", "tests/stdlib_ops/templates/test_template_profiles.py",
             # the kernel reports read the same cubins on either path, and their time bounds come from a profile
             "tests/stdlib_ops/graph/test_graph_report.py")
# the benchmarks of the CPU operators, the users' CPU kernels and the emulator against C loops never take the GPU path
NOT_RERUN_TESTS = (*(f"tests/examples/test_examples.py::test_example_runs[benchmarks/{name}.py --quick]"
                     for name in ("cpu_ops", "user_kernels", "emulator", "parallel_loops")),
                   # its sizes are a GPU's there (minutes on the emulator); the Hopper template's tests launch the same
                   "tests/examples/test_examples.py::test_example_runs[hopper_matmul.py]",
                   # a profile opens on the emulator only, as the example says (HIDET_LANG_CUDA=emulator)
                   "tests/examples/test_examples.py::test_example_runs[profile_matmul.py]")


def cpu_only_test_files() -> list[Path]:
    """The test files that never name CUDA, a GPU or the emulator: they build for the CPU (or nothing) only, so a
    run on the simulated GPU would repeat them unchanged."""
    return [path.relative_to(ROOT) for path in sorted((ROOT / "tests").rglob("test_*.py"))
            if not re.search(r"cuda|gpu|emulator", path.read_text(), re.IGNORECASE)]


def check_skips(output: str, summary: str) -> None:
    """Every test a pytest run skipped is reported on a SKIPPED line, for a reason in ALLOWED_SKIPS."""
    skips = re.findall(r"^SKIPPED \[(\d+)\] \S+?:(?:\d+:)? (.*)$", output, re.MULTILINE)
    unexpected = sorted({reason for _, reason in skips} - ALLOWED_SKIPS)
    assert not unexpected, f"tests skipped for reasons not in ALLOWED_SKIPS: {unexpected}"
    skipped = re.search(r"(\d+) skipped", summary)
    assert sum(int(count) for count, _ in skips) == (int(skipped.group(1)) if skipped else 0), summary


def test_the_test_suite_passes_on_the_simulated_gpu(driver_dir: Path) -> None:
    ignored = [f"--ignore={path}" for path in (Path(__file__).relative_to(ROOT), *NOT_RERUN,
                                                *cpu_only_test_files())]
    ignored += [f"--deselect={test}" for test in NOT_RERUN_TESTS]
    # the rerun's subject is the GPU path, not the data, which the first run drew: a quarter of the examples; its
    # modules are compiled by NVRTC for the simulated GPU's architecture, and the first run checked the others and
    # read the machine code (the tests marked machine_code, which a second run would repeat); the GPU-marked tests
    # run on the simulated GPU in the next test (gpu_check.py runs them), and those parametrized to run on the CPU
    # are deselected (rerun_selection.py)
    done = run([sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", "-p", "rerun_selection",
                "-m", "not machine_code and not gpu", "tests", *ignored],
               {**environment(driver_dir), "HYPOTHESIS_PROFILE": "rerun", "HIDET_LANG_VERIFY_CUBINS": ""})
    summary = done.stdout.strip().splitlines()[-1]
    assert int(re.search(r"(\d+) passed", summary).group(1)) >= 400, summary
    check_skips(done.stdout, summary)


def test_gpu_check_and_the_gpu_tests_pass_on_the_simulated_gpu(driver_dir: Path) -> None:
    done = run([sys.executable, "examples/gpu_check.py", "--quick"], environment(driver_dir))
    summary = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed|error)", line)][-1]
    assert not re.search(r"failed|error", summary) and int(re.search(r"(\d+) passed", summary).group(1)) >= 40, summary
    assert "needs a CUDA GPU" not in done.stdout, "the GPU-marked tests were skipped"
    check_skips(done.stdout, summary)
    table = done.stdout[done.stdout.index("kernel "):]
    assert re.search(r"vector add \d+ f32 +\d+\.\d+ ms", table), table
    assert len(re.findall(r"matmul \d+\^3 f32 +\d+\.\d+ ms", table)) == 2, table


def test_driver_scenarios_on_a_simulated_sm_86(driver_dir: Path) -> None:
    done = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                str(SIMULATED / "simulated_scenarios.py")], environment(driver_dir, capability=86))
    assert passed_without_skips(done.stdout) == 7  # every test of simulated_scenarios.py
