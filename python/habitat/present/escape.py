"""Text from a trace made safe for each output format.

Op names, module paths, autograd nodes, kernel names and origin strings in a trace come from
whoever wrote the trace: a report must show them as text, never run them. One function per
format: HTML (a report), Markdown (a report, TensorBoard's text panel, which renders
Markdown) and the terminal.
"""
from __future__ import annotations

import html
import re

# Control characters (C0 but tab, DEL and C1): an ANSI escape in a module name would drive
# the terminal that prints the forecast.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
# What Markdown (CommonMark and GitHub's) gives a meaning anywhere in a line: emphasis, code,
# links and images (no "[": no link, no image), tables, strikethrough and the escape itself.
# "<", ">" and "&" become entities, so no HTML tag nor entity a renderer would pass through
# survives. Digits, dots and dashes stay as they are, so the report's numbers stay readable.
_MARKDOWN = re.compile(r"([\\`*_\[\]|~])")
# What starts a heading or a list at the start of a block (a marker, then a space).
_BLOCK_START = re.compile(r"^(\s*)(#{1,6}|[+\-=]|\d{1,9}[.)])(?=\s|$)")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def terminal_text(text: str) -> str:
    """`text` with control characters shown as escapes (``\\x1b``), on one line."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def _escape_marker(m: re.Match[str]) -> str:
    marker = m.group(2)  # "1." escapes its dot (a backslash before a digit is no escape)
    return m.group(1) + (marker[:-1] + "\\" + marker[-1] if marker[0].isdigit() else "\\" + marker)


def markdown_text(text: str, *, starts_line: bool = True) -> str:
    """`text` as literal Markdown: every character Markdown or HTML would interpret is escaped
    (``<script>`` shows as ``<script>``, a ``[link](url)`` as its characters), line breaks and
    control characters are flattened, so one value stays in one table cell or paragraph.
    `starts_line`: the text begins a line (a paragraph, a heading), where "# " or "1. " would
    start a heading or a list; not so in a table cell."""
    flat = terminal_text(str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " "))
    escaped = _MARKDOWN.sub(r"\\\1", flat)
    if starts_line:
        escaped = _BLOCK_START.sub(_escape_marker, escaped)
    return "".join(_ENTITIES.get(c, c) for c in escaped)


def html_text(text: str) -> str:
    """`text` as HTML text: ``html.escape`` (quotes included), control characters as escapes
    (HTML forbids them in text)."""
    return html.escape(terminal_text(text))
