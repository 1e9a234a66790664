"""Tuning spaces: their points (the default first, the constraint honoured), membership (exact keys, values of
the declared types), the CPU matmul template's declaration (its default point is the template's defaults), and
templates named as plain data."""

from __future__ import annotations

import inspect

import pytest

from stdlib_ops.templates.kernels.matmul_cpu import MATMUL_CPU_SPACE, matmul_cpu
from stdlib_ops.templates.kernels.matmul_cuda import MATMUL_CUDA_SPACE, matmul_cuda
from stdlib_ops.templates.space import TuningSpace, resolve_template, space_of, template_ref


def test_points_start_with_the_default_and_honour_the_constraint() -> None:
    space = TuningSpace({"a": (1, 2, 4), "b": (8, 16)}, default={"a": 2, "b": 16}, constraint=lambda p: p["a"] < 4)
    points = space.points()
    assert points[0] == {"a": 2, "b": 16}
    assert len(points) == 4 and all(p["a"] < 4 for p in points)
    assert len({tuple(sorted(p.items())) for p in points}) == len(points)


def test_membership_needs_every_key_and_a_declared_value_of_its_type() -> None:
    space = TuningSpace({"a": (1, 2), "wrong": (False, True)}, default={"a": 1, "wrong": False})
    assert space.contains({"a": 2, "wrong": True})
    assert not space.contains({"a": 3, "wrong": True})
    assert not space.contains({"a": 1})
    assert not space.contains({"a": 1, "wrong": False, "extra": 0})
    assert not space.contains({"a": True, "wrong": False})  # True == 1, but it is no tile size
    assert not space.contains([("a", 1), ("wrong", False)])


def test_a_default_outside_the_space_is_refused() -> None:
    with pytest.raises(ValueError, match="default"):
        TuningSpace({"a": (1, 2)}, default={"a": 3})
    with pytest.raises(ValueError, match="default"):
        TuningSpace({"a": (1, 2)}, default={"a": 2}, constraint=lambda p: p["a"] < 2)
    with pytest.raises(ValueError, match="at least one value"):
        TuningSpace({"a": ()}, default={})


def test_the_cpu_matmul_template_declares_its_defaults_as_the_default_point() -> None:
    assert space_of(matmul_cpu) is MATMUL_CPU_SPACE
    defaults = {name: p.default for name, p in inspect.signature(matmul_cpu).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert MATMUL_CPU_SPACE.default == {name: defaults[name] for name in MATMUL_CPU_SPACE.choices}
    assert len(MATMUL_CPU_SPACE.points()) > 1
    assert space_of(matmul_cuda) is MATMUL_CUDA_SPACE and MATMUL_CUDA_SPACE.default["block_m"] is None


def test_templates_are_named_as_plain_data() -> None:
    ref = template_ref(matmul_cpu)
    assert ref == "stdlib_ops.templates.kernels.matmul_cpu:matmul_cpu"
    assert resolve_template(ref) is matmul_cpu
