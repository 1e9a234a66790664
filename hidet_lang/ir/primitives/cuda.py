"""`hidet_lang.cuda` under Hidet's module path `hidet.ir.primitives.cuda`."""

from hidet_lang.cuda import *  # noqa: F403 - the same names, re-exported
from hidet_lang.cuda import __all__  # noqa: F401
