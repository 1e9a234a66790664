"""Targets as values: `Target.of` reads 'cpu', 'cuda' and 'cuda:<arch>' (and passes a Target through), `str` gives
the spelling back, the device and the architecture's features follow from it, and bad spellings are ValueErrors
that list what is accepted."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hidet_lang.cuda_limits import arch_number, normalize_arch
from hidet_lang.target import Target, TargetKind


@pytest.mark.parametrize(("text", "kind", "arch", "device"), [
    ("cpu", TargetKind.CPU, None, "cpu"), ("cuda", TargetKind.CUDA, None, "cuda"),
    ("cuda:sm_80", TargetKind.CUDA, "sm_80", "cuda"), ("cuda:90a", TargetKind.CUDA, "sm_90a", "cuda"),
    (" cuda:sm_100f", TargetKind.CUDA, "sm_100f", "cuda"),
])
def test_a_spelled_target_is_read_and_spelled_back(text: str, kind: TargetKind, arch: str | None,
                                                     device: str) -> None:
    target = Target.of(text)
    assert (target.kind, target.arch, target.device, target.is_cuda) == (kind, arch, device, kind == TargetKind.CUDA)
    assert Target.of(str(target)) == target and Target.of(target) is target
    assert str(target) == (f"cuda:{arch}" if arch else kind)


@pytest.mark.parametrize(("text", "message"), [
    ("tpu", "unknown or unavailable target 'tpu'; available: cpu, cuda (or 'cuda:<arch>', e.g. 'cuda:sm_90a')"),
    ("cpu:sm_80", "unknown or unavailable target 'cpu:sm_80'"),
    ("cuda:sm_9", "invalid CUDA architecture 'sm_9'; expected 'sm_XY', 'sm_XYa' (XY >= 90)"),
    ("cuda:sm_80a", "invalid CUDA architecture 'sm_80a': no such variant"),
    ("cuda:", "invalid CUDA architecture ''"),
])
def test_a_bad_target_says_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        Target.of(text)
    assert message in str(excinfo.value)


def test_a_target_is_a_spelling_or_a_target() -> None:
    with pytest.raises(TypeError, match="a target is 'cpu', 'cuda', 'cuda:<arch>' or a Target, got 80"):
        Target.of(80)  # type: ignore[arg-type]


@pytest.mark.parametrize(("device", "target"), [("cpu", "cpu"), ("cuda", "cuda")])
def test_the_target_of_a_device(device: str, target: str) -> None:
    assert Target.for_device(device) == Target.of(target)


@pytest.mark.parametrize(("arch", "minimum", "runs"), [
    ("sm_90a", "sm_80", True), ("sm_90a", "sm_90a", True), ("sm_90", "sm_90a", False), ("sm_100a", "sm_90a", False),
    ("sm_100", "sm_90", True), ("sm_80", "sm_90", False), ("sm_86", "80", True),
])
def test_architecture_features(arch: str, minimum: str, runs: bool) -> None:
    """A feature of an architecture family runs on later ones; one specific to an architecture (`a`) on it alone."""
    assert Target.of(f"cuda:{arch}").has_arch(minimum) is runs


def test_no_architecture_no_features() -> None:
    assert not Target.of("cpu").has_arch("sm_80") and not Target.of("cuda").has_arch("sm_80")


@given(st.integers(10, 199), st.sampled_from(["", "a", "f"]), st.booleans())
def test_architecture_spellings_normalize(number: int, suffix: str, prefixed: bool) -> None:
    spelled = f"{'sm_' if prefixed else ''}{number}{suffix}"
    if (suffix == "a" and number < 90) or (suffix == "f" and number < 100):
        with pytest.raises(ValueError, match="no such variant"):
            normalize_arch(spelled)
        return
    assert normalize_arch(spelled) == f"sm_{number}{suffix}"
    assert arch_number(normalize_arch(spelled)) == number
