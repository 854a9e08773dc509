"""A report as data: sections of paragraphs, tables, figures and commands, and two renderings.

The HTML rendering is one self-contained file: its style sheet is inline and
every figure is a PNG in a ``data:`` URI, so it opens anywhere with no network.
The Markdown rendering carries the same text and tables, and links each
figure to a PNG file written beside it.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from biasaudit.render.text import PlainTable

__all__ = [
    "Bullets",
    "Code",
    "Document",
    "Figure",
    "Links",
    "Paragraph",
    "Section",
    "Table",
    "to_html",
    "to_markdown",
]

SIMULATED_BANNER = (
    "SIMULATED model: sim/ is biasaudit's built-in offline model, for demos and tests "
    "(sim/biased has planted biases, sim/fair none). It is not a language model; no "
    "finding here is about a real model."
)
SIMULATED_TAG = "SIMULATED model"


@dataclass(frozen=True)
class Paragraph:
    """Plain text; ``strong`` renders it in bold (the headline sentences)."""

    text: str
    strong: bool = False


@dataclass(frozen=True)
class Bullets:
    items: Sequence[str]


@dataclass(frozen=True)
class Links:
    """Links to pages beside the report, each ``(text, address)``: a relative address
    biasaudit made (``evidence.html#view=pairs&group=B_M``), escaped like any text."""

    items: Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Code:
    """Commands or other text shown verbatim."""

    text: str


@dataclass(frozen=True)
class Table:
    """A table of text cells; every column but the first is right-aligned unless ``left``."""

    headers: Sequence[str]
    rows: Sequence[Sequence[str]]
    caption: str = ""
    left: frozenset[int] = frozenset({0})
    links: Mapping[tuple[int, int], str] = field(default_factory=dict)
    """Cells shown as links, by (row, column): a relative address biasaudit made (the
    evidence behind the row's figures, ``evidence.html#view=pairs&group=B_M``)."""

    @classmethod
    def of(cls, table: PlainTable) -> Table:
        """A table of the command line (:class:`~biasaudit.render.text.PlainTable`) as
        the report draws it: its title the caption, its label columns left."""
        rows = [[str(cell) for cell in row] for row in table.rows]
        left = frozenset(range(table.labels))
        return cls(list(table.header), rows, caption=table.title or "", left=left)


@dataclass(frozen=True)
class Figure:
    """A PNG image with its alternative text and caption; ``name`` is its Markdown file."""

    name: str
    png: bytes
    alt: str
    caption: str = ""


Block = Paragraph | Bullets | Links | Code | Table | Figure


@dataclass
class Section:
    title: str
    anchor: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    """A whole report: title, subtitle, whether a simulated model appears, and its sections."""

    title: str
    subtitle: str
    simulated: bool
    sections: list[Section] = field(default_factory=list)

    def figures(self) -> list[Figure]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Figure)]


_STYLE = """
body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;color:#111;background:#fff;
margin:0 auto;max-width:1100px;padding:1.5rem 2rem 3rem;line-height:1.45;font-size:15px}
h1{font-size:1.7rem;margin:.2rem 0}h2{font-size:1.25rem;margin:2.2rem 0 .6rem;
border-bottom:2px solid #222;padding-bottom:.2rem}
.subtitle{color:#444;margin:0 0 1rem}
.sim{border:3px dashed #000;background:#eee;padding:.6rem .9rem;font-weight:bold;margin:1rem 0}
.tag{font-size:.75rem;border:1.5px solid #000;padding:.05rem .35rem;margin-left:.6rem;
vertical-align:middle;background:#eee;letter-spacing:.03em}
nav ol{columns:2;margin:.4rem 0 1rem;padding-left:1.4rem}
table{border-collapse:collapse;margin:.3rem 0 1.2rem;font-size:.88rem}
p.caption{color:#333;margin:1rem 0 .2rem;font-style:italic;font-size:.88rem}
table+p.caption{margin-top:1.4rem}
th,td{border:1px solid #bbb;padding:.25rem .55rem;vertical-align:top}
th{background:#e8e8e8}tbody tr:nth-child(even){background:#f6f6f6}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
figure{margin:1rem 0 1.6rem}figure img{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{color:#333;font-size:.88rem;margin-top:.3rem}
pre{background:#f3f3f3;border:1px solid #ccc;padding:.6rem .8rem;overflow-x:auto;
font-size:.85rem;white-space:pre-wrap;word-break:break-all}
p.headline{font-weight:bold;margin:.5rem 0}
footer{margin-top:3rem;color:#555;font-size:.8rem;border-top:1px solid #ccc;padding-top:.5rem}
"""


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _html_block(block: Block) -> str:
    if isinstance(block, Paragraph):
        css = ' class="headline"' if block.strong else ""
        return f"<p{css}>{_escape(block.text)}</p>"
    if isinstance(block, Bullets):
        items = "".join(f"<li>{_escape(item)}</li>" for item in block.items)
        return f"<ul>{items}</ul>"
    if isinstance(block, Links):
        items = "".join(
            f'<li><a href="{_escape(href)}">{_escape(text)}</a></li>' for text, href in block.items
        )
        return f"<ul>{items}</ul>"
    if isinstance(block, Code):
        return f"<pre>{_escape(block.text)}</pre>"
    if isinstance(block, Table):
        return _html_table(block)
    data = base64.b64encode(block.png).decode("ascii")
    caption = f"<figcaption>{_escape(block.caption)}</figcaption>" if block.caption else ""
    return (
        f'<figure><img alt="{_escape(block.alt)}" src="data:image/png;base64,{data}">'
        f"{caption}</figure>"
    )


def _html_table(table: Table) -> str:
    caption = f'<p class="caption">{_escape(table.caption)}</p>' if table.caption else ""
    head = "".join(f"<th>{_escape(h)}</th>" for h in table.headers)
    thead = f"<thead><tr>{head}</tr></thead>" if any(table.headers) else ""
    body = []
    for r, row in enumerate(table.rows):
        cells = []
        for i, cell in enumerate(row):
            shown = _escape(cell)
            if (r, i) in table.links:
                shown = f'<a href="{_escape(table.links[(r, i)])}">{shown}</a>'
            css = "" if i in table.left else ' class="num"'
            cells.append(f"<td{css}>{shown}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"{caption}<table>{thead}<tbody>{''.join(body)}</tbody></table>"


def to_html(document: Document, *, footer: str = "") -> str:
    """The report as one self-contained HTML5 page (no external resource of any kind)."""
    tag = f'<span class="tag">{SIMULATED_TAG}</span>' if document.simulated else ""
    banner = f'<div class="sim" role="note">{_escape(SIMULATED_BANNER)}</div>' if tag else ""
    toc = "".join(
        f'<li><a href="#{s.anchor}">{_escape(s.title)}</a></li>' for s in document.sections
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_escape(document.title)}</title><style>{_STYLE}</style></head><body>",
        f"<header><h1>{_escape(document.title)}{tag}</h1>",
        f'<p class="subtitle">{_escape(document.subtitle)}</p>{banner}',
        f"<nav><ol>{toc}</ol></nav></header><main>",
    ]
    for section in document.sections:
        parts.append(f'<section id="{section.anchor}"><h2>{_escape(section.title)}{tag}</h2>')
        parts.extend(_html_block(block) for block in section.blocks)
        parts.append("</section>")
    parts.append(f"</main><footer>{_escape(footer)}</footer></body></html>")
    return "\n".join(parts) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_link(text: str, address: str) -> str:
    """A Markdown link whose text, whatever it holds, stays its text (brackets escaped)."""
    shown = text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    return f"[{shown}](<{address}>)"


def _md_block(block: Block, figure_dir: str) -> str:
    if isinstance(block, Paragraph):
        return f"**{block.text}**" if block.strong else block.text
    if isinstance(block, Bullets):
        return "\n".join(f"- {item}" for item in block.items)
    if isinstance(block, Links):
        return "\n".join(f"- [{text}](<{href}>)" for text, href in block.items)
    if isinstance(block, Code):
        return f"```\n{block.text}\n```"
    if isinstance(block, Table):
        lines = [f"*{block.caption}*", ""] if block.caption else []
        lines.append("| " + " | ".join(_md_cell(h) for h in block.headers) + " |")
        lines.append(
            "|"
            + "|".join(" --- " if i in block.left else " ---: " for i in range(len(block.headers)))
            + "|"
        )
        for r, row in enumerate(block.rows):
            cells = [
                _md_cell(_md_link(c, block.links[(r, i)])) if (r, i) in block.links
                else _md_cell(c)
                for i, c in enumerate(row)
            ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)
    caption = f"\n\n*{block.caption}*" if block.caption else ""
    return f"![{block.alt}]({figure_dir}/{block.name}){caption}"


def to_markdown(document: Document, *, figure_dir: str, footer: str = "") -> str:
    """The report in Markdown; figures link to ``figure_dir/<name>`` (written by the caller)."""
    tag = f" — {SIMULATED_TAG}" if document.simulated else ""
    parts = [f"# {document.title}{tag}", "", document.subtitle, ""]
    if document.simulated:
        parts += [f"> **{SIMULATED_BANNER}**", ""]
    for section in document.sections:
        parts += [f"## {section.title}{tag}", ""]
        for block in section.blocks:
            parts += [_md_block(block, figure_dir), ""]
    if footer:
        parts += ["---", "", footer, ""]
    return "\n".join(parts)
