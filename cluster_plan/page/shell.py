"""A page: one self-contained HTML document, its style inline and no script, carrying the
generator mark that lets a command replace only a page it wrote (cluster_plan.output_files)."""

from __future__ import annotations

from html import escape


def text(value: object) -> str:
    """A value as HTML text: escaped, and nothing for None."""
    return escape("" if value is None else str(value))


def page(title: str, body: str, style: str, mark: str) -> str:
    """The document: `title` is text, `body` HTML, `mark` the generator's <meta>."""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{mark}'
        f"<title>{escape(title)}</title><style>{style}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def verdict(passed: bool) -> str:
    """PASSED or FAILED, coloured by the page's `.pass` and `.fail` classes."""
    return '<span class="pass">PASSED</span>' if passed else '<span class="fail">FAILED</span>'


def bullets(items: list[str]) -> str:
    """A list of text lines; nothing when there is none."""
    return f"<ul>{''.join(f'<li>{escape(i)}</li>' for i in items)}</ul>" if items else ""
