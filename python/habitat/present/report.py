"""A report of a forecast: Markdown or HTML (by file suffix).

HTML is one self-contained file (the plot embedded); Markdown links its plot, written beside it
(``report.md`` -> ``report_files/gpus.png``), so the text stays small and readable.

The report opens with the verdict (fastest as seen, cheapest, host-bound) and a chart of the
step as seen against the kernels alone per GPU; then every GPU ranked by the step as seen with
its cost per step and of the run, the forecast of the trace's targets (the step as seen, its
kernels and phases, top ops, step history), the prices used and the memory forecast.
"""
from __future__ import annotations

import base64
import datetime as _dt
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from habitat.analysis.choice import step_choices, verdict
from habitat.analysis.memory import format_bytes
from habitat.analysis.pricing import price_per_hour
from habitat.analysis.regions import compiled_regions
from habitat.data.files import atomic_write_bytes, atomic_write_text
from habitat.present import timeline_view, view
from habitat.present.escape import html_text, markdown_text

if TYPE_CHECKING:
    from habitat.analysis.compare import Comparison
    from habitat.data.forecast import Forecast

MARKDOWN_SUFFIXES = (".md", ".markdown")
HTML_SUFFIXES = (".html", ".htm")
TOP_OPS = 15

# A report is a list of blocks, rendered to either format: ("h", level, text), ("p", text),
# ("verdict", text), ("table", rows with the header first[, a class: "names", its first two
# columns hold long names that may break anywhere; "text", every column is text]), ("img",
# png bytes, alt text).


def _forecast_blocks(forecast: "Forecast") -> list[Any]:
    step = forecast.latest
    # The forecast's own targets, fastest as seen first, as print(forecast) lists them.
    targets = [c.gpu for c in step_choices(step, forecast.targets, None)]
    blocks: list[Any] = [("h", 2, f"Forecast for step {step.index}: {', '.join(targets)}")]
    blocks.extend(("p", w) for w in view.step_warnings(step))
    rows = [["", *targets]]
    seen = timeline_view.rows(step, targets)  # host cadence and syncs included
    for label, cells in seen or [("step as seen (ms)", [f"{step.step_ms(t):.3f}" for t in targets])]:
        rows.append([label.strip(), *cells])
    rows.append(["kernels (ms)", *(f"{step.total_ms[t]:.3f}" for t in targets)])
    for phase, values in view.phase_rows(step, targets):
        rows.append([f"kernels: {phase} (ms)", *(f"{v:.3f}" for v in values)])
    methods = step.method_ops[targets[0]]
    blocks.append(("p", f"Measured {step.measured_ms:.3f} ms for the whole step on "
                        f"{forecast.origin.get('device', 'cpu')}. Ops counted in {targets[0]}'s total, "
                        f"by forecast method: " + view.method_counts(step, targets[0]) + "."))
    blocks.append(("table", rows))
    blocks.extend(("p", line) for line in timeline_view.sentences(step, targets))
    if methods:
        blocks.append(("table", [["method", "meaning"],
                                 *([m, meaning] for m, meaning in view.method_legend(list(methods)))],
                       "text"))
    if step.op_count():
        blocks.append(("h", 3, f"Top {TOP_OPS} ops by their share of the step on {targets[0]}"))
        rows = [["op", "module", "phase", "input shapes", "measured (us)",
                 *(f"{t} (us)" for t in targets), "method"]]
        for op in view.top_ops(step, targets[0], TOP_OPS):
            rows.append([op.full_name, view.op_location(op), op.phase, view.format_shapes(op, limit=4),
                         f"{op.measured_us:.1f}", *(f"{op.predictions[t].share_us:.2f}" for t in targets),
                         op.predictions[targets[0]].share_method])
        blocks.append(("table", rows, "names"))
    regions = compiled_regions(step, targets[0])
    if regions:
        blocks.append(("h", 3, f"Compiled regions (torch.compile) on {targets[0]}"))
        rows = [["region", "phase", "fused kernels", "extern ops", "predicted (us)",
                 "kernels (source aten ops)"]]
        for r in regions:
            kernels = "; ".join(f"{k.name} ({', '.join(dict.fromkeys(k.sources))})"
                                for k in r.kernels)
            rows.append([r.name, r.phase, str(len(r.kernels)), str(len(r.extern_ops)),
                         f"{r.time_us:.1f}", kernels or "-"])
        blocks.append(("table", rows))
    if step.unsupported:
        blocks.append(("p", "Not modelled (forecast from bytes moved; please report): "
                            + ", ".join(step.unsupported)))
    if len(forecast.steps) > 1:
        blocks.append(("h", 3, "Steps"))
        rows = [["step", "measured (ms)", *(f"{t} as seen (ms)" for t in targets)]]
        for s in forecast.steps:
            rows.append([str(s.index), f"{s.measured_ms:.3f}", *(f"{s.step_ms(t):.3f}" for t in targets)])
        blocks.append(("table", rows))
    return blocks


def _comparison_blocks(comparison: "Comparison") -> list[Any]:
    blocks: list[Any] = [("h", 2, "Every GPU, ranked by the step as seen"),
                         ("p", f"Step {comparison.step_index}; the run: {comparison.run_label}; "
                               "the cost per step and of the run are the on-demand price times "
                               "the step as seen.")]
    blocks.append(("table", comparison.table_rows()))
    blocks.extend(("p", note) for note in comparison.notes())
    priced = [r for r in comparison.rows if r.price is not None]
    if priced:
        blocks.append(("h", 3, "Prices used"))
        rows = [["GPU", "$/GPU-hour", "provider", "offer", "date", "source"]]
        for r in priced:
            p = r.price
            assert p is not None
            rows.append([r.gpu, f"{p.usd_per_hour:.2f}", p.provider or "-", p.sku or "-",
                         p.date or "undated", p.source or "-"])
        blocks.append(("table", rows, "text"))
        if comparison.prices.rule:
            blocks.append(("p", "Default rule: " + comparison.prices.rule))
    return blocks


def _memory_blocks(comparison: "Comparison") -> list[Any]:
    memory = comparison.memory
    if memory is None:
        return []
    blocks: list[Any] = [("h", 2, "Memory")]
    rows = [["category", "bytes"]]
    for name, value in memory.breakdown().items():
        rows.append([name.replace("_", " "), format_bytes(value)])
    rows.append(["estimated peak", format_bytes(memory.estimated_peak())])
    if memory.measured_peak_bytes:
        rows.append(["measured peak (allocator)", format_bytes(memory.measured_peak_bytes)])
    blocks.append(("table", rows))
    blocks.append(("p", f"The live total peaks at {memory.peak_op} ({memory.peak_phase}). "
                        "Activations are the peak of live activations and temporaries; the "
                        "categories do not add up to the peak because they peak at different "
                        "times."))
    short = [r for r in comparison.rows if r.fits is False]
    if short:
        blocks.append(("p", "Does not fit: " + ", ".join(
            f"{r.gpu} ({format_bytes(-(r.margin_bytes or 0))} short)" for r in short) + "."))
    blocks.extend(("p", "Note: " + n) for n in memory.notes)
    return blocks


def build_blocks(forecast: "Forecast", comparison: "Comparison | None") -> list[Any]:
    """The report's blocks: its first screen is the verdict and the chart of the step as seen
    against the kernels alone per GPU; the tables follow."""
    from habitat._version import __version__

    origin = forecast.origin
    step = forecast.latest
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    blocks: list[Any] = [("h", 1, "Habitat forecast report")]
    if not view.step_warnings(step):
        choices = ([r.choice() for r in comparison.rows] if comparison is not None
                   else step_choices(step, forecast.targets, price_per_hour))
        blocks.append(("verdict", verdict(choices)))
    if comparison is not None:
        blocks.append(("img", comparison.plot_bytes("png", row_in=0.22),
                       "step as seen and kernels alone per GPU, and USD per 1M steps"))
    blocks.append(("p", f"Generated {now} by Habitat {__version__}. Trace captured on "
                        f"{origin.get('device', 'cpu')}"
                        + (f" ({origin['host']})" if origin.get("host") else "")
                        + (f", torch {origin['torch_version']}" if origin.get("torch_version") else "")
                        + f"; {len(forecast.steps)} step(s); step {step.index} measured "
                          f"{step.measured_ms:.2f} ms there."))
    if comparison is not None:
        blocks += _comparison_blocks(comparison)
    blocks += _forecast_blocks(forecast)
    if comparison is not None:
        blocks += _memory_blocks(comparison)
    return blocks


# ----- rendering -------------------------------------------------------------------------
def render_markdown(blocks: Sequence[Any], image_dir: Path | None = None) -> str:
    """Markdown text; with `image_dir`, images are written there and linked by a path relative to
    its parent (the report's folder), otherwise embedded as data URIs."""
    out: list[str] = []
    images = 0
    for block in blocks:
        kind = block[0]
        # Every text is escaped, as render_html escapes it: names in a trace come from whoever
        # wrote it, and a viewer that renders Markdown also renders HTML and links.
        if kind == "h":
            out.append("#" * block[1] + " " + markdown_text(block[2]))
        elif kind == "verdict":
            out.append(f"**{markdown_text(block[1])}**")
        elif kind == "p":
            out.append(markdown_text(block[1]))
        elif kind == "table":
            rows = block[1]
            lines = ["| " + " | ".join(markdown_text(c, starts_line=False) for c in row) + " |"
                     for row in rows]
            out += [lines[0], "|" + "---|" * len(rows[0]), *lines[1:]]
        elif kind == "img":
            if image_dir is None:
                data = base64.b64encode(block[1]).decode("ascii")
                out.append(f"![{markdown_text(block[2])}](data:image/png;base64,{data})")
            else:
                images += 1
                name = "gpus.png" if images == 1 else f"image{images}.png"
                image_dir.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(image_dir / name, block[1])
                out.append(f"![{markdown_text(block[2])}]({image_dir.name}/{name})")
        out.append("")
    return "\n".join(out)


# Fits a 1280 px window: a column of 1100 px at most; text wraps at spaces, and the long names
# of the op tables (module paths, shapes) anywhere, instead of widening the table.
_CSS = """body{font-family:system-ui,sans-serif;margin:1em auto;max-width:1100px;padding:0 1em;color:#222}
h1{font-size:1.4em;margin:0.3em 0}
.verdict{font-size:1.2em;font-weight:600;background:#eef5ff;border-left:5px solid #1f77b4;padding:0.5em 0.8em}
table{border-collapse:collapse;margin:1em 0;font-size:0.85em;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left;white-space:nowrap}
.names td:nth-child(-n+2){overflow-wrap:anywhere;text-align:left}
.text td{text-align:left}
img{max-width:100%}"""


def render_html(blocks: Sequence[Any]) -> str:
    out = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">",
           "<title>Habitat forecast report</title>", f"<style>{_CSS}</style></head><body>"]
    for block in blocks:
        kind = block[0]
        if kind == "h":
            out.append(f"<h{block[1]}>{html_text(block[2])}</h{block[1]}>")
        elif kind == "verdict":
            out.append(f"<p class=\"verdict\">{html_text(block[1])}</p>")
        elif kind == "p":
            out.append(f"<p>{html_text(block[1])}</p>")
        elif kind == "table":
            rows = block[1]
            out.append((f"<table class=\"{block[2]}\">" if len(block) > 2 else "<table>")
                       + "<thead><tr>" + "".join(f"<th>{html_text(c)}</th>" for c in rows[0])
                       + "</tr></thead><tbody>")
            out.extend("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in row) + "</tr>"
                       for row in rows[1:])
            out.append("</tbody></table>")
        elif kind == "img":
            data = base64.b64encode(block[1]).decode("ascii")
            out.append(f"<img alt=\"{html_text(block[2])}\" src=\"data:image/png;base64,{data}\">")
    out.append("</body></html>")
    return "\n".join(out)


def write_report(forecast: "Forecast", path: str | Path, comparison: "Comparison | None" = None,
                 **compare_options: Any) -> Path:
    """Writes the report to `path` (.md/.markdown or .html/.htm); a Markdown report's plot goes
    to ``<name>_files/`` beside it.

    Without `comparison`, GPUs are compared with ``forecast.compare(**compare_options)``
    (all known GPUs by default).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in MARKDOWN_SUFFIXES + HTML_SUFFIXES:
        raise ValueError(f"cannot tell the report format of {str(path)!r}: "
                         "name it .html (HTML) or .md (Markdown)")
    if comparison is None:
        comparison = forecast.compare(**compare_options)
    blocks = build_blocks(forecast, comparison)
    if suffix in MARKDOWN_SUFFIXES:
        text = render_markdown(blocks, image_dir=path.with_name(path.stem + "_files"))
    else:
        text = render_html(blocks)
    atomic_write_text(path, text)  # a crash or a full disk leaves the previous report
    return path
