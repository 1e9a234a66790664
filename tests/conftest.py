"""Suite-wide settings: every module a test lowers has its IR verified after every pipeline step; every CUDA
module built by a test is also compiled to cubin for sm_80 and sm_90 and checked; tests marked `gpu` are skipped
where no CUDA GPU is usable; the hypothesis profile is `$HYPOTHESIS_PROFILE` (`default`, `thorough`, `rerun` or
`mutation`)."""

from __future__ import annotations

import os

import pytest

from hidet_lang.testing import load_profile

os.environ.setdefault("HIDET_LANG_VERIFY_IR", "1")
os.environ.setdefault("HIDET_LANG_VERIFY_CUBINS", "sm_80,sm_90")
load_profile()  # HYPOTHESIS_PROFILE=thorough: ten times the examples (tests count them with example_count)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_tests:
        return
    from codegen.runtime.cuda_driver import gpu_available

    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; none is usable here")
    for item in gpu_tests:
        item.add_marker(skip)
