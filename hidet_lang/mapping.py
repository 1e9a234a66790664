"""Task mappings, where Hidet Script had them (`hidet.lang.mapping`)."""

from hidet_lang.ir.mapping import ComposedMapping, RepeatMapping, SpatialMapping, TaskMapping, auto_map, repeat, spatial

__all__ = ["ComposedMapping", "RepeatMapping", "SpatialMapping", "TaskMapping", "auto_map", "repeat", "spatial"]
