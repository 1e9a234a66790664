"""Lowering passes; `pipeline.lower` runs them in order."""
