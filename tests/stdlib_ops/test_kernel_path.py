"""One path from a task to its kernel: templates are looked up and bound in one function of the registry
(`template_choice`), a graph build chooses each fusion group's schedule once, and eager calls and graphs share one
compiled-kernel cache by schedule key, in front of which the eager calls' memo is emptied when choices change."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import stdlib_ops as ops
from hidet_lang.target import Target
from stdlib_ops.graph import build as graph_build
from stdlib_ops.runtime import kernels
from stdlib_ops.runtime.dispatch import EAGER
from stdlib_ops.runtime.kernels import KERNELS
from stdlib_ops.templates import registry
from stdlib_ops.templates.registry import choose_schedule, template_choice

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("hidet_lang", "codegen", "stdlib_ops", "examples")


def template_lookups(tree: ast.AST) -> list[tuple[int, str]]:
    """The calls of `TEMPLATES.lookup(...)` and of `<binding>.for_target(...)` in `tree`: (line, the function
    they are in)."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                called, owner = child.func.attr, child.func.value
                if called == "for_target" or (called == "lookup" and isinstance(owner, ast.Name)
                                              and owner.id == "TEMPLATES"):
                    found.append((child.lineno, inner))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_templates_are_looked_up_and_bound_only_by_the_chooser() -> None:
    calls = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found = template_lookups(ast.parse(path.read_text(), str(path)))
            if found:
                calls[str(path.relative_to(ROOT))] = found
    assert set(calls) == {"stdlib_ops/templates/registry.py"}, calls
    assert {function for _, function in calls["stdlib_ops/templates/registry.py"]} == {"template_choice"}


def test_the_scanner_finds_lookups_and_bindings() -> None:
    tree = ast.parse("def f(t):\n    TEMPLATES.lookup(t, x)\n    return b.for_target(x)\nother.lookup(1)\n")
    assert template_lookups(tree) == [(2, "f"), (3, "f")]


W = np.random.default_rng(1).standard_normal((29, 11)).astype(np.float32)


def fused_graph() -> ops.FlowGraph:
    """A graph of three fusion groups: a matmul with a prologue, a reduction with epilogues, a reduction."""
    xs = ops.symbol(["batch", 29])
    h = ops.matmul(ops.tanh(xs * 2.0), ops.asarray(W))
    out = ops.sum(ops.exp(h) - 1.0, axis=-1) * 3.0 + ops.max(xs, axis=1)
    return ops.optimize(ops.trace_from([out, h], [xs]))


def test_a_graph_build_chooses_each_groups_schedule_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def counted(task: ops.Task, target: Target, *, prologue: bool = False) -> registry.Schedule:
        asked.append(task.name)
        return choose_schedule(task, target, prologue=prologue)

    monkeypatch.setattr(graph_build, "choose_schedule", counted)
    compiled = fused_graph().build("cpu")
    # the matmul by constant weights is a matmul_packed once the graph is built for the CPU
    assert len(compiled.kernels) == 3 and sorted(asked) == ["matmul_packed", "max", "sum"]


def test_eager_calls_and_graphs_share_one_compiled_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    build_module = kernels.build_module

    def counted(module: object, target: Target) -> object:
        built.append(str(target))
        return build_module(module, target)

    monkeypatch.setattr(kernels, "build_module", counted)
    x = np.random.default_rng(2).standard_normal((3, 29)).astype(np.float32)
    xs, ws = ops.symbol([3, 29]), ops.symbol([29, 11])
    compiled = ops.trace_from(ops.matmul(xs, ws), [xs, ws]).build("cpu")
    key = choose_schedule(ops.matmul(xs, ws).producer.task, Target.of("cpu")).key
    assert built == ["cpu"] and key in KERNELS
    np.testing.assert_allclose(compiled(x, W).numpy(), x @ W, rtol=1e-5, atol=1e-5)

    eager = ops.matmul(ops.asarray(x), ops.asarray(W))  # the graph's kernel, not built again
    again = ops.matmul(ops.asarray(x), ops.asarray(W))
    assert built == ["cpu"]
    np.testing.assert_allclose(eager.numpy(), x @ W, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(again.numpy(), eager.numpy())

    rebuilt = ops.trace_from(ops.matmul(xs, ws), [xs, ws]).build("cpu")  # another graph of it: no build either
    assert built == ["cpu"] and rebuilt.modules[0] is compiled.modules[0]


def test_the_eager_memo_is_emptied_when_choices_change_and_finds_the_kernel_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    x = ops.asarray(np.linspace(-1, 1, 13, dtype=np.float32))
    expected = np.tanh(x.numpy())
    ops.tanh(x)
    assert len(EAGER._calls) > 0
    built: list[object] = []
    monkeypatch.setattr(kernels, "build_module", lambda *args, **kwargs: built.append(args))
    registry.choices_changed()  # as a tuning record or a registration does
    np.testing.assert_allclose(ops.tanh(x).numpy(), expected, rtol=1e-6)
    assert len(EAGER._calls) == 1 and built == []  # chosen again, the same key: the kernel is in the cache


def test_the_schedule_is_made_of_the_choice() -> None:
    matmul = ops.matmul(ops.symbol([8, 16]), ops.symbol([16, 4])).producer.task
    relu = ops.relu(ops.symbol([8])).producer.task
    choice = template_choice(matmul, Target.of("cpu"))
    assert choice.by_template == (choice.binding is not None)  # a library template, unless the machine lacks FMA
    assert choose_schedule(matmul, Target.of("cpu")).key == choice.key
    assert choose_schedule(matmul, Target.of("cpu")).params == choice.params
    assert not template_choice(relu, Target.of("cpu")).by_template
    assert choose_schedule(relu, Target.of("cpu")).key == template_choice(relu, Target.of("cpu")).key
    assert choose_schedule(relu, Target.of("cpu")).key.endswith("|rules")
