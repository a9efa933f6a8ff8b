"""The HTML kit (cluster_plan.page): one shell, one table, one heatmap and one trend line for
every page the project writes, and text escaped on the way in."""

from __future__ import annotations

from pathlib import Path

from cluster_plan.page.heatmap import EMPTY, GOOD, heatmap
from cluster_plan.page.shell import bullets, page, text, verdict
from cluster_plan.page.table import Cell, Row, table, text_table
from cluster_plan.page.trend import trend

ROOT = Path(__file__).resolve().parents[2]
EVIL = '<script>alert("x")</script>&'


def test_the_shell_is_one_self_contained_document() -> None:
    html = page(EVIL, "<p>body</p>", "p{color:red}", '<meta name="generator" content="x">')
    assert html.startswith('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">')
    assert "<title>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;</title>" in html
    assert "<style>p{color:red}</style>" in html and "<body><p>body</p></body>" in html
    assert html.endswith("</html>\n") and "<script" not in html


def test_tables_escape_text_and_keep_html_cells() -> None:
    html = table([EVIL], [Row(["<b>1</b>"], "bad"), [Cell("2", "n", "width:1px", colspan=2)]])
    assert html == (
        "<table><tr><th>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;</th></tr>"
        '<tr class="bad"><td><b>1</b></td></tr>'
        '<tr><td class="n" style="width:1px" colspan="2">2</td></tr></table>'
    )
    assert table(None, [["x"]]) == "<table><tr><td>x</td></tr></table>"
    assert text_table(["a"], [[EVIL], [None]]) == (
        "<table><tr><th>a</th></tr><tr><td>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
        "&amp;</td></tr><tr><td></td></tr></table>"
    )
    assert text(None) == "" and text(3) == "3"


def test_verdicts_and_lists() -> None:
    assert verdict(True) == '<span class="pass">PASSED</span>'
    assert verdict(False) == '<span class="fail">FAILED</span>'
    assert bullets([]) == "" and bullets([EVIL]).startswith("<ul><li>&lt;script")


def test_the_heatmap_draws_every_pair_and_escapes_labels() -> None:
    svg = heatmap(["a", EVIL], {("a", EVIL): (GOOD, "9.9", "note")}, "t")
    assert svg.count("<rect") == 4 and svg.count(f'fill="{EMPTY}"') == 3
    assert "<title>a / &lt;script&gt;" in svg and "9.9; note</title>" in svg
    assert "<script" not in svg


def test_a_trend_without_a_known_value_draws_nothing() -> None:
    assert trend([None, None], 1.0, "t") == ""
    line = trend([1.0, None, 3.0], 2.0, EVIL)
    assert line.count("<circle") == 2 and "stroke-dasharray" in line and "<script" not in line


def test_no_page_draws_a_shell_or_a_table_of_its_own() -> None:
    """Every page is drawn with the kit: no other module writes a document or a table."""
    drawn = []
    for path in sorted((ROOT / "cluster_plan").rglob("*.py")):
        if path.parent.name == "page":
            continue
        source = path.read_text()
        drawn += [f"{path.relative_to(ROOT)}: {tag}" for tag in ("<!DOCTYPE", "<table", "<tr")
                  if tag in source]  # fmt: skip
    assert drawn == []
