"""The frontend: Python AST -> IR, with host values evaluated while parsing."""
