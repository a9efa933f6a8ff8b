"""The pair heatmap: a square of cells, one per (row, column) pair of the same labels, each
coloured, with a short figure and a tooltip; inline SVG. The colours of a verdict are here, so
that every heatmap and legend says the same thing in the same colour."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

CELL, LABEL = 34, 90  # a cell's side and the room for the labels, in pixels
# meets the plan, an outlier, fails it, the measurement failed, nothing to show
GOOD, WARN, BAD, ERRORED, EMPTY = "#2e7d32", "#f9a825", "#c62828", "#6a1b9a", "#eeeeee"
UNJUDGED = "#607d8b"  # measured, but not judged (inconclusive)


def heatmap(
    labels: Sequence[str],
    cells: Mapping[tuple[str, str], tuple[str, ...]],
    title: str,
) -> str:
    """cells[(row, col)] = (colour, text[, note for the tooltip]); rows and columns in the
    order of `labels`; a pair without a cell is drawn EMPTY."""
    size = LABEL + CELL * len(labels) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
        f'role="img" aria-label="{escape(title)}">'
    ]
    for i, name in enumerate(labels):
        y = LABEL + CELL * i + CELL / 2 + 4
        x = LABEL + CELL * i + CELL / 2
        out.append(f'<text x="{LABEL - 4}" y="{y}" text-anchor="end">{escape(name)}</text>')
        out.append(
            f'<text x="{x}" y="{LABEL - 4}" transform="rotate(-60 {x} {LABEL - 4})">'
            f"{escape(name)}</text>"
        )
    for r, row in enumerate(labels):
        for c, col in enumerate(labels):
            colour, text, *note = cells.get((row, col), (EMPTY, ""))
            x, y = LABEL + CELL * c, LABEL + CELL * r
            tip = f"{row} / {col}: {text}" + "".join(f"; {n}" for n in note if n)
            out.append(
                f'<rect x="{x}" y="{y}" width="{CELL - 1}" height="{CELL - 1}" fill="{colour}">'
                f"<title>{escape(tip)}</title></rect>"
            )
            if text:
                out.append(
                    f'<text x="{x + CELL / 2}" y="{y + CELL / 2 + 4}" text-anchor="middle" '
                    f'fill="white">{escape(text[:5])}</text>'
                )
    out.append("</svg>")
    return "".join(out)
