"""A class on one server: N simulated students open the app, type their own sentence and move sliders.

Each student is a websocket client that speaks Streamlit's own protocol (the ``BackMsg``/``ForwardMsg``
protobufs that ship with streamlit), so the benchmark measures the server, not a browser: the 2-core machine
could not run forty Chromiums. A few real Chromium pages run alongside and report what a browser sees.

Per student: connect and run the page (the default sentence), type the student's own sentence into the text
box, wait for the chart of that sentence (its subtitle names the sentence), then move the layer and head
sliders three times, waiting each time for the chart of that layer and head. It records:

- time from opening the page to the student's own chart, and per slider move (p50, p95, max);
- errors (exceptions shown, closed connections, timeouts);
- leaks: every message a student receives is scanned for any other student's sentence marker;
- peak memory of the server process (RSS, sampled every 0.2 s).

Also: all N students sending a ~500-token text at the same moment (memory under a burst of long captures).
The server runs with this repository's .streamlit/config.toml and the Dockerfile's malloc settings ("tuned"),
and optionally with Streamlit's defaults for the two settings that matter under load ("defaults": full GC
after every run, file watcher on).

Everything talks to 127.0.0.1 only, and every wait is bounded.

Run:  python bench/bench_class.py [--students 10 20 40] [--compare-defaults] [--browsers 2]
Widget keys and URL parameters used (keep in sync with pages/attention_heatmaps.py): text area ``text``,
sliders ``layer`` and ``head``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
import websockets  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

TEXT_KEY, LAYER_KEY, HEAD_KEY = "text", "layer", "head"
CONTAINER_MALLOC = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}
WAIT = 180.0  # seconds: the longest any single step may take before it counts as an error
TOPICS = [
    "the river",
    "a mountain",
    "the library",
    "her garden",
    "the old bridge",
    "a small boat",
    "the market",
    "his violin",
    "the winter",
    "a letter",
    "the harbour",
    "the orchard",
    "a lantern",
    "the meadow",
]


def marker(run: str, student: int) -> str:
    return f"Zq{run}s{student:02d}"


def sentence(run: str, student: int, *, long: bool = False) -> str:
    base = f"{marker(run, student)} wrote about {TOPICS[student % len(TOPICS)]} and the evening light"
    return base + (" and the quiet town by the sea" * 60 if long else "")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """``streamlit run app.py`` on loopback, with the repository's settings or Streamlit's defaults."""

    def __init__(self, *, defaults: bool):
        self.port = free_port()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        extra = ["--runner.postScriptGC", "true", "--server.fileWatcherType", "auto"] if defaults else []
        if not defaults:
            env.update(CONTAINER_MALLOC)  # as the Dockerfile sets them
        self.log = Path(f"/tmp/bench-class-{self.port}.log")
        command = [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless",
            "true",
            "--server.port",
            str(self.port),
            "--server.address",
            "127.0.0.1",
            *extra,
        ]
        with self.log.open("w") as output:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
        self.peak = 0
        self._stop = threading.Event()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.3)
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        process = psutil.Process(self.process.pid)
        while not self._stop.is_set():
            try:
                rss = process.memory_info().rss + sum(c.memory_info().rss for c in process.children(recursive=True))
                self.peak = max(self.peak, rss)
            except psutil.Error:
                return
            time.sleep(0.2)

    def reset_peak(self) -> None:
        self.peak = 0

    def stop(self) -> None:
        self._stop.set()
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Student:
    """One websocket session: runs the page, types, moves sliders; watches every message it receives."""

    def __init__(self, port: int, run: str, number: int, others: list[str], *, long: bool = False):
        self.url = f"ws://127.0.0.1:{port}/_stcore/stream"
        self.run_id, self.number, self.others, self.long = run, number, others, long
        self.widgets: dict[str, str] = {}  # user key -> widget id
        self.errors: list[str] = []
        self.leaks: list[str] = []
        self.open_to_chart: float | None = None
        self.moves: list[float] = []

    async def session(self, moves: int) -> None:
        try:
            async with websockets.connect(self.url, subprotocols=["streamlit"], max_size=None, open_timeout=60) as ws:
                self.ws = ws
                start = time.monotonic()
                await self._rerun(query="")
                await self._until(lambda spec: "Attention weights" in spec, "first chart")
                await self._rerun(
                    query="", widgets={TEXT_KEY: ("string_value", sentence(self.run_id, self.number, long=self.long))}
                )
                await self._until(lambda spec: marker(self.run_id, self.number) in spec, "own chart")
                self.open_to_chart = time.monotonic() - start
                for move in range(moves):
                    layer, head = (move + 1) % 6, (3 * move + 2) % 12
                    begin = time.monotonic()
                    await self._rerun(query="", widgets={LAYER_KEY: ("slider", layer), HEAD_KEY: ("slider", head)})
                    await self._until(lambda spec, lh=(layer, head): f"layer {lh[0]} · head {lh[1]}" in spec, "move")
                    self.moves.append(time.monotonic() - begin)
        except Exception as error:  # a benchmark records failures; it does not stop at the first one
            self.errors.append(f"{type(error).__name__}: {error}"[:200])

    async def _rerun(self, *, query: str, widgets: dict | None = None) -> None:
        message = BackMsg()
        state = message.rerun_script
        state.query_string = query
        for key, (kind, value) in (widgets or {}).items():
            widget = state.widget_states.widgets.add()
            widget.id = self.widgets[key]
            if kind == "slider":
                widget.double_array_value.data.append(float(value))
            else:
                widget.string_value = value
        await self.ws.send(message.SerializeToString())

    async def _until(self, matches, what: str) -> None:
        """Read messages until a finished run has drawn a chart matching ``matches``."""
        found = False
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            raw = await asyncio.wait_for(self.ws.recv(), timeout=max(deadline - time.monotonic(), 0.1))
            self._scan(raw)
            message = ForwardMsg()
            message.ParseFromString(raw)
            kind = message.WhichOneof("type")
            if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                element = message.delta.new_element
                field = element.WhichOneof("type")
                if field == "exception":
                    self.errors.append(f"exception: {element.exception.message[:120]}")
                elif field == "plotly_chart" and matches(element.plotly_chart.spec):
                    found = True
                elif field in ("slider", "text_area"):
                    widget = getattr(element, field)
                    key = widget.id.rsplit("-", 1)[-1]
                    self.widgets[key] = widget.id
            elif kind == "script_finished" and found:
                return
        raise TimeoutError(f"no {what} within {WAIT:.0f} s")

    def _scan(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="ignore")
        for other in self.others:
            if other in text:
                self.leaks.append(other)


def percentiles(values: list[float]) -> str:
    if not values:
        return "– / – / –"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):.2f} / {p95:.2f} / {ordered[-1]:.2f}"


async def class_run(port: int, count: int, run: str, *, moves: int, long: bool = False) -> list[Student]:
    markers = [marker(run, n) for n in range(count)]
    students = [Student(port, run, n, [m for m in markers if m != markers[n]], long=long) for n in range(count)]
    await asyncio.gather(*(student.session(moves) for student in students))
    return students


def browsers_alongside(port: int, count: int, run: str) -> list[float]:
    """Real Chromium pages (Debian's), each opening a link with its own sentence: seconds to the chart."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return []
    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
        )
        for n in range(count):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/*", lambda route: route.continue_() if "127.0.0.1" in route.request.url else route.abort())
            own = marker(run + "b", n)
            start = time.monotonic()
            page.goto(f"http://127.0.0.1:{port}/?text={quote(sentence(run + 'b', n))}")
            page.wait_for_function(
                "() => [...document.querySelectorAll('.gtitle-subtitle, .gtitle')]"
                f".some(e => e.textContent.includes('{own}'))",
                timeout=WAIT * 1000,
            )
            times.append(time.monotonic() - start)
            page.close()
        browser.close()
    return times


def report(label: str, students: list[Student], server: Server, extra: str = "") -> str:
    opens = [s.open_to_chart for s in students if s.open_to_chart is not None]
    moves = [m for s in students for m in s.moves]
    errors = sum(len(s.errors) for s in students)
    leaks = sum(len(s.leaks) for s in students)
    return (
        f"| {label} | {len(students)} | {percentiles(opens)} | {percentiles(moves)} | {errors} | {leaks} | "
        f"{server.peak / 1e9:.2f} GB | {extra} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument("--moves", type=int, default=3)
    parser.add_argument("--browsers", type=int, default=2)
    parser.add_argument("--compare-defaults", action="store_true", help="also run N=max with Streamlit's defaults")
    parser.add_argument("--no-burst", action="store_true")
    args = parser.parse_args()
    begun = time.monotonic()
    rows = [
        "| server | students | open → own chart s (p50 / p95 / max) | slider move s (p50 / p95 / max) | errors "
        "| leaks | peak memory | browsers: open → chart s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    server = Server(defaults=False)
    try:
        for index, count in enumerate(args.students):
            server.reset_peak()
            students = asyncio.run(class_run(server.port, count, f"r{index}", moves=args.moves))
            pages = browsers_alongside(server.port, args.browsers, f"r{index}") if args.browsers else []
            rows.append(report("tuned", students, server, ", ".join(f"{t:.1f}" for t in pages)))
            print(rows[-1], flush=True)
            for student in students:
                for error in student.errors[:1]:
                    print(f"  student {student.number}: {error}", flush=True)
        if not args.no_burst:
            server.reset_peak()
            count = max(args.students)
            students = asyncio.run(class_run(server.port, count, "long", moves=0, long=True))
            rows.append(report("tuned, ~500-token texts at once", students, server))
            print(rows[-1], flush=True)
    finally:
        server.stop()
    if args.compare_defaults:
        server = Server(defaults=True)
        try:
            count = max(args.students)
            students = asyncio.run(class_run(server.port, count, "d", moves=args.moves))
            rows.append(report("Streamlit defaults", students, server))
            print(rows[-1], flush=True)
        finally:
            server.stop()
    print()
    print("\n".join(rows))
    print(f"\n{os.cpu_count()} CPU cores; total {time.monotonic() - begun:.0f} s")


if __name__ == "__main__":
    main()
