"""Layouts, where Hidet Script had them (`hidet.lang.layout`)."""

from hidet_lang.ir.layout import column_major, local_layout, row_major, strided_layout

__all__ = ["column_major", "local_layout", "row_major", "strided_layout"]
