"""One document model for everything the analysis writes as text: the report and each table are
built once as a list of blocks, then rendered to Markdown (`report.md`, `tables/*.md`) or to one
self-contained HTML page (`index.html`, figures embedded as data URIs)."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

STATUSES = ("agrees", "disagrees", "inconclusive")  # CSS classes of a highlighted cell


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    """Plain text; `kind` "warning" sets it off with a bold `lead`, "note" sets it in italics."""

    text: str
    kind: str = "plain"
    lead: str = ""


@dataclass(frozen=True)
class Grid:
    """A table of strings. `status[i]` (one of STATUSES, or None) highlights row i's last cell."""

    columns: list[str]
    rows: list[list[str]]
    status: list[str | None] = field(default_factory=list)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> Grid:
        """A wide frame whose index labels the rows (first column, no header)."""
        return cls([""] + [str(c) for c in frame.columns],
                   [[str(label)] + [str(v) for v in values] for label, values in frame.iterrows()])


@dataclass(frozen=True)
class Items:
    """A bulleted list of `label: value` (value set as code when `code`)."""

    entries: list[tuple[str, str, bool]]


@dataclass(frozen=True)
class Figure:
    path: Path  # relative to the document's directory
    caption: str


@dataclass(frozen=True)
class Code:
    text: str
    language: str = ""


Block = Heading | Paragraph | Grid | Items | Figure | Code


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block]) -> str:
    lines: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            lines += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Paragraph):
            text = {"warning": f"> **{b.lead}** {b.text}", "note": f"*{b.text}*"}.get(b.kind, b.text)
            lines += [text, ""]
        elif isinstance(b, Grid):
            status = b.status or [None] * len(b.rows)
            lines += ["| " + " | ".join(map(_md_cell, b.columns)) + " |", "|" + "---|" * len(b.columns)]
            for row, s in zip(b.rows, status, strict=True):
                cells = [_md_cell(c) for c in row]
                if s is not None:
                    cells[-1] = f"**{cells[-1]}**"
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
        elif isinstance(b, Items):
            lines += [f"- {label}: " + (f"`{value}`" if code else value) for label, value, code in b.entries] + [""]
        elif isinstance(b, Figure):
            lines += [f"![{b.path.stem}]({b.path.as_posix()})", "", f"*{b.caption}*", ""]
        elif isinstance(b, Code):
            lines += [f"```{b.language}", b.text.rstrip("\n"), "```", ""]
    return "\n".join(lines)


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}td,th{border:1px solid #ccc;padding:3px 8px}
th{background:#f3f3f3}.agrees{color:#006d2c;font-weight:bold}.disagrees{color:#b30000;font-weight:bold}
.inconclusive{color:#8a6d00;font-weight:bold}
.warning{background:#fff4ce;border-left:4px solid #e0a800;padding:0.6em 1em}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}pre{background:#f6f6f6;padding:1em;overflow:auto}"""


def to_html(blocks: list[Block], title: str, directory: Path) -> str:
    """One self-contained page; figures are read from `directory` and embedded."""
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'>", f"<title>{e(title)}</title>",
             f"<style>{CSS}</style></head><body>"]
    for b in blocks:
        if isinstance(b, Heading):
            parts.append(f"<h{b.level}>{e(b.text)}</h{b.level}>")
        elif isinstance(b, Paragraph):
            parts.append({"warning": f"<p class='warning'><strong>{e(b.lead)}</strong> {e(b.text)}</p>",
                          "note": f"<p><em>{e(b.text)}</em></p>"}.get(b.kind, f"<p>{e(b.text)}</p>"))
        elif isinstance(b, Grid):
            status = b.status or [None] * len(b.rows)
            parts.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in b.columns) + "</tr>")
            for row, s in zip(b.rows, status, strict=True):
                cells = [f"<td>{e(c)}</td>" for c in row]
                if s is not None:
                    cells[-1] = f"<td class='{s}'>{e(row[-1])}</td>"
                parts.append("<tr>" + "".join(cells) + "</tr>")
            parts.append("</table>")
        elif isinstance(b, Items):
            parts.append("<ul>" + "".join(f"<li>{e(label)}: " + (f"<code>{e(value)}</code>" if code else e(value))
                                          + "</li>" for label, value, code in b.entries) + "</ul>")
        elif isinstance(b, Figure):
            data = base64.b64encode((directory / b.path).read_bytes()).decode()
            parts.append(f"<figure><img alt='{e(b.path.stem)}' src='data:image/png;base64,{data}'>"
                         f"<figcaption>{e(b.caption)}</figcaption></figure>")
        elif isinstance(b, Code):
            parts.append(f"<pre>{e(b.text)}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
