"""The one error a model importer raises for everything in a model it cannot convert, listed together."""

from __future__ import annotations

from collections.abc import Iterable


class UnsupportedOperationsError(NotImplementedError):
    """A model uses operations that have no stdlib_ops conversion: `missing` maps each one's name to the places it
    is used (FX node names or ONNX node names), in the order met; the message lists them all, with counts."""

    def __init__(self, source: str, missing: dict[str, list[str]], hint: str = "") -> None:
        self.missing = missing
        lines = [f"{source}: {len(missing)} unsupported operation{'s' if len(missing) != 1 else ''}:"]
        for name, places in missing.items():
            shown = ", ".join(places[:5]) + (f", ... ({len(places) - 5} more)" if len(places) > 5 else "")
            lines.append(f"  {name} x{len(places)} (at {shown})")
        if hint:
            lines.append(hint)
        super().__init__("\n".join(lines))


def collect_unsupported(uses: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """`uses` (operation name, place) grouped by name, in order of first use."""
    missing: dict[str, list[str]] = {}
    for name, place in uses:
        missing.setdefault(name, []).append(place)
    return missing
