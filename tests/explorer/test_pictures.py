"""The pictures drawn without Graphviz: task mappings, layouts, DOT graphs; and the DSL lines of generated C and PTX."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from hidet_lang.explorer.dot_svg import dot_to_svg, parse_dot
from hidet_lang.explorer.pictures import layout_picture, mapping_picture, pictures_of
from hidet_lang.explorer.ptx import ptx_dsl_lines
from hidet_lang.explorer.source_lines import dsl_lines
from hidet_lang.ir.layout import column_major, row_major
from hidet_lang.ir.mapping import repeat, spatial

extents = st.integers(1, 5)


def cell_texts(svg: str) -> list[str]:
    """The texts of the grid's cells, row by row (the labels on the sides are left out)."""
    return re.findall(r'<rect [^>]*/><text [^>]*>([^<]*)</text>', svg)


@settings(max_examples=15, deadline=None)
@given(extents, extents, extents, extents)
def test_mapping_picture_numbers_each_task_with_its_worker(a: int, b: int, c: int, d: int) -> None:
    mapping = spatial(a, b) * repeat(c, d)
    rows, cols = mapping.task_shape
    texts = cell_texts(mapping_picture(mapping).svg)
    want = [""] * (rows * cols)
    for worker in range(mapping.num_workers):
        for i, j in mapping(worker):
            want[i * cols + j] = str(worker)
    assert texts == want


def test_layout_picture_shows_each_index_offset() -> None:
    texts = cell_texts(layout_picture(column_major(3, 5)).svg)
    assert texts == [str(i + 3 * j) for i in range(3) for j in range(5)]


def test_large_grids_are_cut_and_say_so() -> None:
    picture = mapping_picture(spatial(100, 2))
    assert "first 64 x 2 cells" in picture.note
    assert len(cell_texts(picture.svg)) == 64 * 2


def test_pictures_of_takes_mappings_and_layouts_once() -> None:
    values = {"m": spatial(2, 2), "again": spatial(2, 2), "l": row_major(2, 3), "n": 3, "s": "text"}
    pictures = pictures_of(values)
    assert [(p.kind, p.title.split(" = ")[0]) for p in pictures] == [("mapping", "m"), ("layout", "l")]


DOT = '''digraph FlowGraph {
  rankdir=TB;
  node [shape=box, fontname="monospace"];
  "%x" [shape=ellipse, label="%x\\nfloat32 (batch, 64)"];
  subgraph cluster_0 {
    label="kernel 0: matmul* + relu";
    style=rounded;
    op0 [label="%0 = matmul(%x, const0)"];
    op1 [label="%1 = relu(%0)"];
  }
  "%x" -> op0;
  op0 -> op1;
  "return %1" [shape=plaintext];
  op1 -> "return %1";
}'''


def test_dot_is_parsed_into_nodes_edges_and_clusters() -> None:
    graph = parse_dot(DOT)
    assert list(graph.nodes) == ["%x", "op0", "op1", "return %1"]
    assert graph.nodes["%x"]["label"] == "%x\nfloat32 (batch, 64)"
    assert graph.edges == [("%x", "op0"), ("op0", "op1"), ("op1", "return %1")]
    assert graph.clusters == [("kernel 0: matmul* + relu", ["op0", "op1"])]


def test_dot_drawing_puts_each_node_below_its_inputs() -> None:
    svg = dot_to_svg(DOT)
    tops = {label: float(y) for y, label in re.findall(r'<rect x="[^"]*" y="([^"]*)"[^>]*/><text[^>]*>([^<]*)<', svg)}
    assert tops["%x"] < tops["%0 = matmul(%x, const0)"] < tops["%1 = relu(%0)"] < tops["return %1"]
    assert svg.count('marker-end="url(#arrow)"') == 3
    assert "kernel 0: matmul* + relu" in svg


def test_generated_lines_know_the_dsl_line_they_came_from() -> None:
    source = "#include <x.h>\n\n// /tmp/a/program.py:6\nvoid f() {\n    // program.py:7\n    x = 1;\n}\nint y;"
    assert dsl_lines(source, "program.py") == [None, None, 6, 6, 7, 7, 7, None]


def test_ptx_lines_follow_loc_directives_and_inlining() -> None:
    ptx = "\n".join([
        '.file 1 "/somewhere/module.cu"', '.file 2 "/include/header.h"',
        ".visible .entry k(", "{", ".loc 1 3 5", "add.s32 %r1, %r2, 1;", ".loc 2 40 1", "mul.f32 %f1, %f2, %f3;",
        ".loc 1 9 2, function_name $L__info_string0, inlined_at 1 4 7", "sub.f32 %f1, %f2, %f3;", "}", "ret;"])
    source_lines = [None, None, 12, 13, None, None, None, None, 20]  # the DSL line of each line of the CUDA C
    assert ptx_dsl_lines(ptx, source_lines) == [None, None, None, None, 12, 12, 12, 12, 13, 13, 13, None]
