"""Suite-wide settings: every module a test lowers has its IR verified after every pipeline step; every CUDA
module built by a test is also compiled to cubin for sm_80 and sm_90a (the simulated GPU's architecture) and
checked; tests marked `gpu` are skipped where no CUDA GPU is usable; the longest test files come first; the
hypothesis profile is `$HYPOTHESIS_PROFILE` (`default`, `thorough`, `rerun` or `mutation`)."""

from __future__ import annotations

import os

import pytest

from hidet_lang.testing import load_profile

os.environ.setdefault("HIDET_LANG_VERIFY_IR", "1")
os.environ.setdefault("HIDET_LANG_VERIFY_CUBINS", "sm_80,sm_90a")
load_profile()  # HYPOTHESIS_PROFILE=thorough: ten times the examples (tests count them with example_count)


# The test files that take longest, run first: spread over several workers (`-n auto`, a file to a worker), the
# suite then ends with short files on every worker rather than one long file on one of them.
LONGEST_FIRST = ("tests/codegen/test_simulated_gpu.py", "tests/stdlib_ops/frontends/test_models.py",
                 "tests/examples/test_examples.py", "tests/stdlib_ops/operators/test_ops_drawn_shapes.py",
                 "tests/stdlib_ops/operators/test_ops_nn.py", "tests/stdlib_ops/test_template_dispatch.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_tests:
        return
    from codegen.runtime.cuda_driver import gpu_available

    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; none is usable here")
    for item in gpu_tests:
        item.add_marker(skip)
