"""`hidet_lang.cpu` under Hidet's module path `hidet.ir.primitives.cpu`."""

from hidet_lang.cpu import *  # noqa: F403 - the same names, re-exported
from hidet_lang.cpu import __all__  # noqa: F401
