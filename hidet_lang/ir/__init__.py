"""The IR: types, expressions, statements, functions, task mappings, the rewriter, printer and verifier."""
