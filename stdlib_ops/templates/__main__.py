"""`python -m stdlib_ops.templates` prints which task goes to which template (`table.markdown`)."""

from __future__ import annotations

from stdlib_ops.templates.table import markdown

print(markdown(), end="")
