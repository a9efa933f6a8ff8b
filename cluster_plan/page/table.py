"""Tables: a header row of text, then rows of cells that are HTML already (escape text with
cluster_plan.page.shell.text), each cell or row with an optional CSS class."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from cluster_plan.page.shell import text


@dataclass(frozen=True)
class Cell:
    """A cell's HTML with what sets it apart: a CSS class, an inline style, a column span."""

    html: str
    css_class: str = ""
    style: str = ""
    colspan: int = 1

    def render(self) -> str:
        attributes = "".join(
            f' {name}="{value}"'
            for name, value in (
                ("class", self.css_class),
                ("style", self.style),
                ("colspan", self.colspan if self.colspan != 1 else ""),
            )
            if value
        )
        return f"<td{attributes}>{self.html}</td>"


@dataclass(frozen=True)
class Row:
    """A row of cells with a CSS class (a verdict's colour, say)."""

    cells: Sequence[str | Cell]
    css_class: str = ""


def _row(row: Row | Sequence[str | Cell]) -> str:
    cells = row.cells if isinstance(row, Row) else row
    opening = f'<tr class="{row.css_class}">' if isinstance(row, Row) and row.css_class else "<tr>"
    body = "".join(c.render() if isinstance(c, Cell) else f"<td>{c}</td>" for c in cells)
    return f"{opening}{body}</tr>"


def table(head: Sequence[str] | None, rows: Iterable[Row | Sequence[str | Cell]]) -> str:
    """A table: `head` (text) as its first row of header cells, unless None."""
    header = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>" if head else ""
    return f"<table>{header}{''.join(_row(row) for row in rows)}</table>"


def text_table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A table of values shown as text (escaped; None as nothing)."""
    return table(head, [[text(v) for v in row] for row in rows])
