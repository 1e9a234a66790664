"""Post-scheduling fusion: prologues and epilogues injected into a scheduled kernel by an IR rewrite.

Describe what to inject with `Prologue` (replaces the element reads of an anchor input) and `Epilogue` (replaces
the element stores to an anchor output with `Store`s), then `fuse(anchor_module, prologues, epilogues)`. A kernel
that uses a fused tensor other than the fusion contract allows raises `FusionContractError` naming its line.
"""

from __future__ import annotations

from stdlib_ops.fusion.contract import FusionContractError, check_fusion_contract, contract_violations
from stdlib_ops.fusion.rewrite import fuse
from stdlib_ops.fusion.spec import Epilogue, Prologue, Store

__all__ = [
    "Epilogue", "FusionContractError", "Prologue", "Store", "check_fusion_contract", "contract_violations", "fuse",
]
