"""The table of which task goes to which template (`stdlib_ops.templates.table`) against the registrations it is
generated from, and README.md's copy of it against the table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import stdlib_ops as ops
from hidet_lang.target import Target
from stdlib_ops.templates import registry
from stdlib_ops.templates.registry import TEMPLATES, template_choice
from stdlib_ops.templates.table import TemplateRow, markdown, template_table

README = Path(__file__).resolve().parents[3] / "README.md"
BEGIN, END = "<!-- template table: begin -->", "<!-- template table: end -->"


def readme_table() -> str:
    """The text between README.md's markers of the template table."""
    text = README.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"README.md needs one {BEGIN} and one {END}"
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip("\n") + "\n"


def test_readme_copies_the_table() -> None:
    assert readme_table() == markdown(), ("README.md's template table differs from the registrations: paste in the "
                                          "output of `python -m stdlib_ops.templates`")


def test_the_package_prints_the_table() -> None:
    done = subprocess.run([sys.executable, "-m", "stdlib_ops.templates"], capture_output=True, text=True, check=True)
    assert done.stdout == markdown()


def test_every_registration_is_listed_with_the_templates_it_binds() -> None:
    rows = template_table()
    assert {(r.task, str(r.kind)) for r in TEMPLATES} == {(row.task, row.target) for row in rows}
    assert TemplateRow("matmul", "cuda", "matmul_cuda_sm90", "sm_90a", True, "matmul_cuda.matmul_on_cuda") in rows
    assert TemplateRow("attention", "cuda", "attention_cuda_sm90", "sm_90a", False,
                       "attention_cuda.attention_on_cuda") in rows
    cpu_rows = {(row.template, row.registered) for row in rows if (row.task, row.target) == ("softmax", "cpu")}
    assert cpu_rows == {("softmax_cpu", "row_views.softmax_rows")}  # the row template of its own task only
    assert {row.template for row in rows if (row.task, row.target) == ("matmul", "cuda")} == {
        "matmul_cuda", "matmul_cuda_f16_mma", "matmul_cuda_tf32", "matmul_cuda_sm90"}


def test_the_templates_the_chooser_binds_are_listed() -> None:
    listed = {(row.task, row.target, row.template) for row in template_table()}
    tasks = [ops.matmul(ops.symbol([64, 64], "float16"), ops.symbol([64, 64], "float16")).producer.task,
             ops.matmul(ops.symbol([32, 16]), ops.symbol([16, 8])).producer.task,
             ops.softmax(ops.symbol([4, 8, 16]), axis=1).producer.task,
             ops.sum(ops.symbol([4, 8, 16]), axis=0).producer.task]
    for task in tasks:
        for target in ("cuda", "cuda:sm_90a", "cuda:sm_80"):
            for prologue in (False, True):
                binding = template_choice(task, Target.of(target), prologue=prologue).binding
                assert binding is not None
                assert (task.name, "cuda", binding.template.__name__) in listed, (task.name, target, binding.name)


def test_a_users_template_is_listed_as_its_own() -> None:
    def my_softmax(task: ops.Task) -> None:
        return None

    original = next(r for r in TEMPLATES if (r.task, str(r.kind)) == ("log_softmax", "cpu"))
    try:
        registry.register_template("log_softmax", "cpu")(my_softmax)
        rows = [row for row in template_table() if (row.task, row.target) == ("log_softmax", "cpu")]
        assert "my_softmax" not in markdown()  # README.md lists the library's
        assert rows == [TemplateRow("log_softmax", "cpu", my_softmax.__qualname__, None, False,
                                    f"{__name__}.{my_softmax.__qualname__}", library=False)]
    finally:
        registry.library_template("log_softmax", registry.LIBRARY_CPU)(original.template)
    assert markdown() == readme_table()
