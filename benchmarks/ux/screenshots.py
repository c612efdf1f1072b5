"""What a user looks at, as a browser shows it: the HTML report and TensorBoard, screenshotted
in headless Chromium (Debian package ``chromium``) at 1280 px, with the checks printed.

    python3 benchmarks/ux/screenshots.py [--out DIR]     (habitat installed; about a minute)

Writes to DIR (default benchmarks/results/ux/):

- ``report-first-screen.png`` (1280 x 800) and ``report-full.png``: ``habitat report`` of a
  recorded host-bound H100 trace (ResNet-50, bf16) compared on every GPU;
- ``tensorboard-time-series.png`` and ``tensorboard-custom-scalars.png`` (1280 x 900): the
  demo's model (habitat.demo.TinyGPT, batch 4, context 64) trained 12 steps on this machine under
  ``predict_on([...], log_dir=...)``, served by ``tensorboard --logdir``.

Checks (printed; exit status 1 when one fails): the report has no horizontal scroll at 1280 px
and no table past the window's edge, its verdict and chart end within the first 800 px, and
TensorBoard's Time Series tab lists the step time (as seen) first, with a run per GPU.
"""
from __future__ import annotations

import argparse
import gzip
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import browser  # noqa: E402

TRACE = ROOT / "benchmarks" / "results" / "h100-sxm5-80gb" / "traces" / "resnet50_bf16.json.gz"
TARGETS = ["A100", "H100", "L4", "T4", "RTX 4090"]
WIDTH, FIRST_SCREEN = 1280, 800


def report_shots(out: Path) -> list[tuple[str, bool, str]]:
    from habitat.data.forecast import Forecast
    from habitat.present.report import write_report

    with gzip.open(TRACE, "rt", encoding="utf-8") as f:
        forecast = Forecast.from_trace(json.load(f), ["H100", "B200", "A100"])
    page = write_report(forecast, out / "report.html")
    geometry = browser.measure(page, WIDTH, FIRST_SCREEN)
    browser.screenshot(page.as_uri(), out / "report-first-screen.png", WIDTH, FIRST_SCREEN)
    browser.screenshot(page.as_uri(), out / "report-full.png", WIDTH, int(geometry["page_height"]))
    return [
        ("report: no horizontal scroll at 1280 px",
         geometry["scroll_width"] <= geometry["client_width"],
         f"scroll width {geometry['scroll_width']} px, window {geometry['client_width']} px"),
        ("report: no table past the window's edge", geometry["tables_past_the_edge"] == 0,
         f"{geometry['tables_past_the_edge']} table(s)"),
        ("report: verdict and chart on the first screen",
         (geometry["chart_bottom"] or 1e9) <= FIRST_SCREEN and geometry["verdict_bottom"] is not None,
         f"verdict ends at {geometry['verdict_bottom']:.0f} px, chart at {geometry['chart_bottom']:.0f} px"),
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train_demo(log_dir: Path) -> None:
    import torch

    import habitat
    from habitat.demo import TinyGPT

    torch.manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    idx = torch.randint(0, 4096, (4, 64))
    predictor = habitat.predict_on(TARGETS, log_dir=log_dir)
    for _ in range(12):
        with predictor:
            model(idx, idx).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    predictor.close()


def tensorboard_shots(out: Path) -> list[tuple[str, bool, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp) / "runs" / "tinygpt"
        _train_demo(log_dir)
        port = _free_port()
        server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir",
                                   str(Path(tmp) / "runs"), "--host", "127.0.0.1", "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_for(f"{url}/data/runs")
            for tab, name in (("timeseries", "time-series"), ("custom_scalars", "custom-scalars")):
                _drawn_shot(f"{url}/#{tab}", out / f"tensorboard-{name}.png")
            dom = browser.dump_dom(f"{url}/#timeseries", WIDTH, 900, wait_ms=15000)
            runs = json.loads(urllib.request.urlopen(f"{url}/data/runs", timeout=10).read())
        finally:
            server.terminate()
            server.wait(timeout=30)
    from habitat.present.tensorboard import OP_HISTOGRAM, PHASE, STEP, TOP_OPS, WAITS

    # Group titles as the page shows them, in page order.
    found = {g: dom.find(f">{g}<") for g in (STEP, PHASE, TOP_OPS, OP_HISTOGRAM, WAITS)}
    first = min((at, g) for g, at in found.items() if at >= 0)[1] if max(found.values()) >= 0 else None
    gpu_runs = [r for r in runs if r.count("/") == 2]
    return [
        ("tensorboard: the step time is the first group", first == STEP, f"first: {first!r}"),
        ("tensorboard: a run per GPU", len(gpu_runs) == len(TARGETS), ", ".join(gpu_runs)),
    ]


def _drawn_shot(url: str, png: Path, tries: int = 3) -> None:
    """The screenshot of `url` with the most drawn: TensorBoard draws its charts in a worker
    that headless Chromium's virtual time does not wait for, so a shot can catch a chart
    before its lines (kept: the one with the most coloured pixels)."""
    from PIL import Image

    best = -1
    for i in range(tries):
        shot = browser.screenshot(url, png.with_suffix(f".try{i}.png"), WIDTH, 900, wait_ms=20000)
        with Image.open(shot) as im:
            hsv = im.convert("RGB").convert("HSV")
            coloured = sum(1 for _, s, v in hsv.getdata() if s > 80 and v > 80)
        if coloured > best:
            best = coloured
            shot.replace(png)
        else:
            shot.unlink()


def _wait_for(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=5).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "ux")
    args = parser.parse_args(argv)
    if browser.chromium() is None:
        print("no headless browser: apt-get install chromium", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    checks = report_shots(args.out) + tensorboard_shots(args.out)
    (args.out / "report.html").unlink()
    width = max(len(name) for name, _, _ in checks)
    for name, ok, detail in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name.ljust(width)}  {detail}")
    print(f"screenshots in {args.out}: " + ", ".join(sorted(p.name for p in args.out.glob("*.png"))))
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
