"""The list of supported torch operations (`torch_supported`) against the conversion table it is read from, and
README.md's copy of it against the list."""

from __future__ import annotations

import operator
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the torch frontend needs torch (the `frontends` extra)")

from stdlib_ops.frontends import torch_ops  # noqa: E402
from stdlib_ops.frontends.torch_supported import NAMESPACES, markdown, supported_operations  # noqa: E402

README = Path(__file__).resolve().parents[3] / "README.md"
BEGIN, END = "<!-- torch operations: begin -->", "<!-- torch operations: end -->"


def readme_list() -> str:
    """The text between README.md's markers of the supported torch operations."""
    text = README.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"README.md needs one {BEGIN} and one {END}"
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip("\n") + "\n"


def test_readme_lists_the_table() -> None:
    assert readme_list() == markdown(), ("README.md's list of supported torch operations differs from the table: "
                                         "paste in the output of `python -m stdlib_ops.frontends.torch_supported`")


def test_every_listed_name_is_a_table_entry_and_every_entry_with_a_public_name_is_listed() -> None:
    listed = supported_operations()
    namespaces = dict(NAMESPACES)
    for prefix, names in listed.items():
        for name in names:
            if prefix == "Tensor":
                assert name in torch_ops.METHODS and hasattr(torch.Tensor, name), name
            elif prefix == "torch.nn":
                assert getattr(torch.nn, name) in torch_ops.MODULES, name
            else:
                assert getattr(namespaces[prefix], name) in torch_ops.FUNCTIONS, f"{prefix}.{name}"
    for prefix, namespace in NAMESPACES:
        for name, value in vars(namespace).items():
            if not name.startswith("_") and any(value is target for target in torch_ops.FUNCTIONS):
                assert name in listed[prefix], f"{prefix}.{name}"
    assert len(listed["Tensor"]) == len(torch_ops.METHODS) and len(listed["torch.nn"]) == len(torch_ops.MODULES)
    assert "masked_fill" in listed["torch"] and "masked_fill_" in listed["Tensor"]
    assert "conv1d" in listed["torch.nn.functional"] and "Conv1d" in listed["torch.nn"]
    assert "add" in listed["operator"] and operator.add in torch_ops.FUNCTIONS


def test_callables_with_private_names_only_are_left_out() -> None:
    assert torch._C._log_api_usage_once in torch_ops.FUNCTIONS
    assert not any("_log_api_usage_once" in names for names in supported_operations().values())


def test_the_list_wraps_at_the_line_length_and_counts_each_namespace() -> None:
    text = markdown(width=100)
    assert all(len(line) <= 100 for line in text.splitlines())
    counts = {m["prefix"]: int(m["count"]) for m in re.finditer(r"^- `(?P<prefix>[\w.]+)` \((?P<count>\d+)\)", text,
                                                                 re.MULTILINE)}
    assert counts == {prefix: len(names) for prefix, names in supported_operations().items()}
