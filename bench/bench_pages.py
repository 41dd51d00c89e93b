"""How long does each page take to show its first figure, and each export to download, in a real browser?

One server (``streamlit run app.py``, local mode, the bundled models) and Debian's Chromium driven by
Playwright. The bundled models are loaded first (a student who has the app open); then, for every page, a fresh
tab opens the page through a link with a text nobody asked for before (so the model runs: nothing is cached)
and the time is taken from ``goto`` to the first figure drawn (a Plotly chart's SVG, a Vega-Lite chart, or
BertViz's frame). Then, once the page has settled, its first PNG, SVG and HTML buttons are clicked in turn,
each timed until its file has downloaded. The same link, with another new text, is also opened in a tab that
has shown the app before (the browser has Streamlit's JavaScript in its cache, as a student's has). Each page
is opened ``--repeats`` times each way; the table shows the median and the slowest.
Targets (issue 14 §5): first figure within 3 s, exports within 2 s, on this 2-core machine.

Run:  python bench/bench_pages.py [--repeats 3] [--page beam_search ...] [--width 1400 --height 1000]
      [--url http://127.0.0.1:8501: measure a server that is already running instead of starting one]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_class import PAGES, sentence  # the same pages, models and text parameters
from tests.browser import CHART, chromium, open_tab, served_app, wait_for_chart, wait_until_idle

FIGURE = (
    "[data-testid='stPlotlyChart'] .main-svg, [data-testid='stVegaLiteChart'] canvas, "
    "[data-testid='stVegaLiteChart'] svg, [data-testid='stIFrame'], iframe"
)
FORMATS = ("PNG", "SVG", "HTML")


def first_figure(browser, url: str, name: str, run: str, size: tuple[int, int], tab=None) -> tuple[float, object]:
    """Seconds from opening the page's link to its first figure; in a fresh tab (nothing in the browser's cache),
    or in ``tab`` (a student's tab that has shown the app before: Streamlit's JavaScript comes from its cache)."""
    spec = PAGES[name]
    params = {"model": spec.model, **dict(spec.extra)}
    if spec.text_key:
        params[spec.text_key] = sentence(run, 0)
    tab = tab or open_tab(browser, width=size[0], height=size[1], downloads=True)
    start = time.monotonic()
    tab.page.goto(f"{url}/{spec.path}?{urlencode(params)}")
    tab.page.locator(FIGURE).first.wait_for(timeout=180_000)
    return time.monotonic() - start, tab


def export_times(tab) -> dict[str, float]:
    # Exports are clicked on a settled page: a click during a run (the page's size probe asks for one more
    # run after the first figure) would hit a button that run replaces.
    if tab.page.locator(CHART).count():
        wait_for_chart(tab.page)
    else:
        wait_until_idle(tab.page)
    times = {}
    for fmt in FORMATS:
        buttons = tab.page.get_by_role("button", name=fmt, exact=True)
        if not buttons.count():
            continue
        start = time.monotonic()
        with tab.page.expect_download(timeout=120_000) as download:
            buttons.first.click()
        download.value.path()  # until the file is complete
        times[fmt] = time.monotonic() - start
    return times


def cell(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} / {max(values):.2f}" if values else "–"


@contextlib.contextmanager
def server(url: str | None, folder: Path):
    """``url`` as given, or a server of its own (``streamlit run app.py``) for the run."""
    if url:
        yield url.rstrip("/")
    else:
        with served_app(folder / "server.log") as started:
            yield started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--page", action="append", choices=list(PAGES), help="repeatable; default: every page")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1000)
    parser.add_argument("--url", help="a running server's address (default: start one, and stop it at the end)")
    args = parser.parse_args()
    names = args.page or list(PAGES)
    size = (args.width, args.height)
    rows = [
        "| page | fresh tab → first figure s (median / max) | tab used before → first figure s | PNG s | SVG s "
        "| HTML s |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as folder, server(args.url, Path(folder)) as url, chromium() as browser:
        for warm in ("attention_heatmaps", "greedy_search"):  # both bundled models loaded, as in a lesson
            first_figure(browser, url, warm, "warm", size)[1].context.close()
        used = first_figure(browser, url, "model_anatomy", "used", size)[1]  # a tab that has shown the app
        for name in names:
            opens, again, exports = [], [], {fmt: [] for fmt in FORMATS}
            for repeat in range(args.repeats):
                seconds, tab = first_figure(browser, url, name, f"p{repeat}{name[:3]}", size)
                opens.append(seconds)
                for fmt, value in export_times(tab).items():
                    exports[fmt].append(value)
                tab.context.close()
                again.append(first_figure(browser, url, name, f"u{repeat}{name[:3]}", size, used)[0])
            cells = [cell(opens), cell(again), *(cell(exports[f]) for f in FORMATS)]
            rows.append(f"| {name} | " + " | ".join(cells) + " |")
            print(rows[-1], flush=True)
    print()
    print("\n".join(rows))


if __name__ == "__main__":
    main()
