"""A class on one server: N simulated students open a page with their own text and move its view sliders.

Each student is a websocket client that speaks Streamlit's own protocol (the ``BackMsg``/``ForwardMsg``
protobufs that ship with streamlit), so the benchmark measures the server, not a browser: the 2-core machine
could not run forty Chromiums. A few real Chromium pages open the same page *during* the class and report what a
browser sees.

Per student: connect and open the page through a link carrying the student's own text (a unique marker word
starts it) and the bundled model the page needs; wait for the run that draws a figure naming the marker (open to
own result); then move the page's view sliders (those that never run the model) three times, each move timed
until a finished run has sent a figure that was not in the run before (the message that carries the new figure,
whatever its labels say). It records per page:

- time from opening to the student's own result, and per slider move (p50, p95, max);
- errors (exceptions shown, closed connections, timeouts);
- leaks: every message a student receives is scanned for any other student's marker;
- peak memory of the server process and its children (PSS, summed RSS beside it; sampled every 0.2 s).

The Lecture page (``--page lecture``) has no text of the student's: its slides' inputs are fixed. Each student
opens a slide of their own instead (spread over both decks' slides, through the slide's plain link), and their
own result is the run that draws that slide's title beside its figure, or on a question slide beside its
question (the view stays hidden until answered; the result the choices come from is computed by then). The
scan for other students' markers still runs (nothing a student typed may reach another), and a lecture student
shown any other slide's title counts as a leak.

Scenarios: ``--page NAME`` (any page), ``--mix`` (students spread over every page), ``--interrupt`` (all
students ask for one shared result while one of them moves a slider at once, so Streamlit interrupts the run the
others wait on: every student must still get it), ``--long`` (~500-token texts at the same moment),
``--maximum`` (the decoding pages at the largest steps and beams a class server allows, sampling drawing a
continuation; with ``--mix --long``: the heaviest class at once, for peak memory). The server
runs in hosted mode with the Dockerfile's environment. ``--table`` runs every page at 10 and 40 students and
prints the README's table. Everything talks to 127.0.0.1 only, and every wait is bounded.

Run:  python bench/bench_class.py --page sampling --students 10 40
      python bench/bench_class.py --table
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import itertools
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
import websockets  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

CONTAINER_ENV = {
    "EXPLORER_HOSTED": "1",
    "MALLOC_ARENA_MAX": "2",
    "MALLOC_MMAP_THRESHOLD_": "131072",
    "MALLOC_TRIM_THRESHOLD_": "131072",
    "OMP_NUM_THREADS": "1",
}
WAIT = 180.0  # seconds: the longest any single step may take before it counts as an error
FIGURES = ("plotly_chart", "vega_lite_chart", "arrow_vega_lite_chart", "iframe")
ENCODER, DECODER = "sentence-transformers/all-MiniLM-L6-v2", "bundled/prose-gpt2"


@dataclass(frozen=True)
class PageSpec:
    """How a student uses a page: its URL path, model, the URL parameter that holds their text, and the
    sliders that only change the view, with the values a student moves them to."""

    path: str
    model: str | None  # None: the page picks its own (a lecture slide runs the model its source used)
    text_key: str | None
    moves: tuple[tuple[str, tuple[float, ...]], ...] = ()
    # A slider drawn before the page's model run, and another value for it: moving it while the run's progress
    # bar shows interrupts that run (the interruption scenario).
    interrupt: tuple[str, float] | None = None
    extra: tuple[tuple[str, str], ...] = ()  # other URL parameters every student's link carries
    # URL parameters of the interruption scenario only (a run long enough to be interrupted); the class itself
    # uses the page's defaults.
    interrupt_extra: tuple[tuple[str, str], ...] = ()
    # Whether the figures name the text (titles do; BertViz's frames carry word pieces, not the text).
    text_in_figures: bool = True
    # A lecture slide: its title, the heading the student's own run draws (the slide's inputs are fixed, so no
    # text of the student's can name the result).
    heading: str | None = None
    asks: bool = False  # a lecture slide that asks its question first: its view stays hidden until answered


PAGES = {
    "attention_heatmaps": PageSpec("", ENCODER, "text", (("layer", (1, 3, 5)), ("head", (2, 7, 11)))),
    "tokens_embeddings": PageSpec("tokens_embeddings", ENCODER, "text"),
    "model_anatomy": PageSpec("model_anatomy", ENCODER, None),
    "attention_step_by_step": PageSpec(
        "attention_step_by_step", ENCODER, "text", (("layer", (1, 3, 5)), ("head", (2, 7, 11)))
    ),
    "neuron_view": PageSpec("neuron_view", ENCODER, "text", (("layer", (1, 3, 5)), ("head", (2, 7, 11)))),
    "heads_overview": PageSpec("heads_overview", ENCODER, "text", (("layer", (1, 3, 5)),)),
    "bertviz_views": PageSpec("bertviz_views", ENCODER, "text", (("bv_layer", (1, 3, 5)),), text_in_figures=False),
    "head_statistics": PageSpec("head_statistics", ENCODER, "text", (("layer", (1, 3, 5)), ("head", (2, 7, 11)))),
    "compare_attention": PageSpec("compare_attention", ENCODER, "text", (("layer", (1, 3, 5)), ("head", (2, 7, 11)))),
    # Steps: the decoding to the slider's maximum, cut (greedy search is prefix-consistent).
    "greedy_search": PageSpec("greedy_search", DECODER, "prompt", (("steps", (12, 4, 16)),)),
    "beam_search": PageSpec(
        "beam_search",
        DECODER,
        "prompt",
        (("upto", (1, 3, 5)),),
        interrupt=("beams", 2),
        interrupt_extra=(("steps", "32"),),
    ),
    "sampling": PageSpec("sampling", DECODER, "prompt", (("temperature", (0.5, 1.5, 0.8)), ("top_p", (0.9, 0.5, 0.7)))),
    # Temperature: the sampled decodings of the slider's other values, computed ahead while the server is idle.
    "compare_strategies": PageSpec("compare_strategies", DECODER, "prompt", (("temperature", (0.5, 1.5, 1.25)),)),
    "generation_attention": PageSpec(
        "generation_attention", DECODER, "prompt", (("layer", (1, 3, 4)), ("head", (2, 5, 1)))
    ),
    # Each student opens a slide of their own, spread over both decks (``spread``); no moves.
    "lecture": PageSpec("lecture", None, None),
}
# The largest settings a hosted class server allows on the decoding pages (EXPLORER_MAX_NEW_TOKENS,
# EXPLORER_MAX_BEAMS), with the sampling page drawing a continuation: ``--maximum``.
MAXIMUM = (("steps", "32"), ("beams", "4"), ("sample_steps", "32"), ("draw", "true"))
TOPICS = ["the river", "a mountain", "the library", "her garden", "the old bridge", "a small boat", "the market"]


def marker(run: str, student: int) -> str:
    return f"Zq{run}s{student:02d}"


def sentence(run: str, student: int, *, long: bool = False) -> str:
    base = f"{marker(run, student)} wrote about {TOPICS[student % len(TOPICS)]} and the evening light"
    return base + (" and the quiet town by the sea" * 60 if long else "")


def revealed(deck) -> str:
    """The link's ``answers`` value that reveals every question of ``deck`` (``6-r``): each slide draws its view."""
    from explorer.lecture import tour

    return tour.write_answers(dict.fromkeys(tour.questions(deck), tour.REVEALED))


def on_slide(spec: PageSpec, index: int, *, reveal: bool = False) -> PageSpec:
    """The lecture page on slide ``index`` of both decks in turn (anatomy's, then generation's, cycled), with
    every question of its deck revealed by the link when ``reveal``."""
    from explorer.lecture import DECKS

    slides = [(deck, number) for deck in DECKS.values() for number in range(1, len(deck) + 1)]
    deck, number = slides[index % len(slides)]
    extra = (("deck", deck.name), ("slide", str(number)), *((("answers", revealed(deck)),) if reveal else ()))
    slide = deck.slide(number)
    asks = slide.question is not None and not reveal
    return dataclasses.replace(spec, extra=spec.extra + extra, heading=slide.title, asks=asks)


def spread(plan: list[PageSpec]) -> list[PageSpec]:
    """Each lecture student of ``plan`` on a slide of their own (the n-th of them on the n-th slide)."""
    lecture = itertools.count()
    return [on_slide(spec, next(lecture)) if spec.path == "lecture" and not spec.heading else spec for spec in plan]


def heading(markdown: str) -> str | None:
    """The text of a ``## `` heading as drawn (Markdown escapes dropped), else None."""
    return markdown[3:].replace("\\", "") if markdown.startswith("## ") else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def resident(process: psutil.Process) -> tuple[int, int]:
    """(PSS, RSS) bytes of one process; (0, 0) once it is gone. PSS splits each page shared between processes
    among them (Chrome's processes share most of theirs), so summed over a process tree it is the memory the
    tree holds, as a container's memory limit counts it; summed RSS counts a shared page once per process."""
    try:
        rss = process.memory_info().rss
        with open(f"/proc/{process.pid}/smaps_rollup") as rollup:
            pss = next(int(line.split()[1]) * 1024 for line in rollup if line.startswith("Pss:"))
        return pss, rss
    except (psutil.Error, OSError, StopIteration):
        return 0, 0


class Server:
    """``streamlit run app.py`` on loopback, in hosted mode with the Dockerfile's environment."""

    def __init__(self, profile: str | None = None, *, idle: bool = False, env: dict[str, str] | None = None):
        """``env``: more environment for the server (a switch a benchmark compares, say)."""
        self.port = free_port()
        environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        environment.update({"TOKENIZERS_PARALLELISM": "false", **CONTAINER_ENV, **(env or {})})
        self.log = Path(f"/tmp/bench-class-{self.port}.log")
        command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"]
        command += ["--server.port", str(self.port), "--server.address", "127.0.0.1"]
        # py-spy samples where the server's Python holds the GIL (flamegraph-ready "raw" stacks), or with ``idle``
        # every thread at every sample, waiting included: where a run or a message waits rather than computes.
        if profile:
            sampled = ["--idle", "--threads"] if idle else ["--gil"]
            command = ["py-spy", "record", *sampled, "--rate", "50", "--format", "raw", "-o", profile, "--", *command]
        with self.log.open("w") as output:
            self.process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=output, stderr=subprocess.STDOUT)
        self.profiling = bool(profile)
        self.peak = self.peak_rss = 0  # bytes: proportional (shared pages split), and resident summed
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
        while not self._stop.is_set() and process.is_running():
            try:
                tree = [process, *process.children(recursive=True)]
            except psutil.Error:
                return
            sizes = [resident(member) for member in tree]
            self.peak = max(self.peak, sum(pss for pss, _ in sizes))
            self.peak_rss = max(self.peak_rss, sum(rss for _, rss in sizes))
            time.sleep(0.2)

    def wait_until_quiet(self, *, limit: float = 30.0) -> float:
        """Until the server and its children (the export worker and its Chrome, which the first figure starts in
        the background) use under a fifth of a core, as minutes before a lesson; returns the seconds waited."""
        start = time.monotonic()
        process = psutil.Process(self.process.pid)

        def busy() -> float:
            try:
                return sum(sum(p.cpu_times()[:2]) for p in [process, *process.children(recursive=True)])
            except psutil.Error:
                return 0.0

        before = busy()
        while time.monotonic() - start < limit:
            time.sleep(0.5)
            now = busy()
            if now - before < 0.1:
                break
            before = now
        return time.monotonic() - start

    def stop(self) -> None:
        self._stop.set()
        # py-spy writes its file when interrupted (and stops the server it started).
        self.process.send_signal(signal.SIGINT if self.profiling else signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Student:
    """One websocket session on one page: opens it with its own text, moves sliders, watches every message."""

    def __init__(self, port: int, spec: PageSpec, own: str, text: str, others: list[str]):
        self.url = f"ws://127.0.0.1:{port}/_stcore/stream"
        self.spec, self.own, self.text, self.others = spec, own, text, set(others)
        # Every marker is "Zq<run>s<number>": one scan of each message finds them all (a search per other
        # student's marker cost the simulated students CPU on the server's two cores).
        prefix = own.rstrip("0123456789").encode()
        self._markers = re.compile(re.escape(prefix) + rb"\d+")
        self.widgets: dict[str, str] = {}  # user key -> widget id (sliders; buttons and components by full key)
        self.fragments: dict[str, str] = {}  # widget id -> the fragment it was drawn in ("" for none)
        self.errors: list[str] = []
        self.leaks: list[str] = []
        self.open_to_result: float | None = None
        self.moves: list[float] = []
        self.shown: set[str] = set()  # digests of the figures of the last finished run
        self.headings: list[str] = []  # the ``## `` headings of the run under way (a lecture slide's title)
        self.address = ""  # the query string the server last gave the page (a browser's address bar)
        self.progressing = False  # a progress bar was drawn (a model run is under way)
        self.interrupted = False  # this student's slider move stopped a run under way (interruption scenario)

    def query(self) -> str:
        return link_query(self.spec, self.text)

    async def session(self, moves: int, *, interrupt: bool = False, pause: float = 0.0) -> None:
        try:
            async with websockets.connect(self.url, subprotocols=["streamlit"], max_size=None, open_timeout=60) as ws:
                self.ws = ws
                start = time.monotonic()
                await self._rerun()
                if interrupt:  # move a slider at once: Streamlit stops the run the others are waiting on
                    key, value = self.spec.interrupt
                    self.interrupted = await self._until_progress(key)
                    await self._rerun({key: value})
                await self._until(self._own_result, "own result")
                self.open_to_result = time.monotonic() - start
                for move in range(moves if self.spec.moves else 0):
                    await asyncio.sleep(pause)  # the student reads the page before moving a slider
                    changes = {key: values[move % len(values)] for key, values in self.spec.moves}
                    begin = time.monotonic()
                    before = set(self.shown)
                    await self._rerun(changes)
                    await self._until(lambda figures, b=before: bool(set(figures) - b), "move")
                    self.moves.append(time.monotonic() - begin)
        except Exception as error:  # a benchmark records failures; it does not stop at the first one
            self.errors.append(f"{type(error).__name__}: {error}"[:200])

    def _own_result(self, figures: dict) -> bool:
        if self.spec.heading:  # a lecture slide: its title beside a figure (any slide's figure names no student),
            # or its question (the result its choices come from computed)
            return (bool(figures) or self.spec.asks) and self.spec.heading in self.headings
        # A page without a text (the anatomy) shows the same figures to everyone: any is the result.
        named = self.spec.text_key and self.spec.text_in_figures
        return any(self.own in f for f in figures.values()) if named else bool(figures)

    def _message(self) -> BackMsg:
        """A rerun of the page as the browser shows it: its link, no widget changed."""
        message = BackMsg()
        message.rerun_script.query_string = self.query()
        message.rerun_script.page_name = self.spec.path
        return message

    async def _rerun(self, changes: dict | None = None) -> None:
        message = self._message()
        state = message.rerun_script
        for key, value in (changes or {}).items():
            if key not in self.widgets:
                raise KeyError(f"no slider {key!r} on {self.spec.path or 'the heatmap page'}")
            # As a browser does: a widget drawn inside a fragment reruns that fragment alone.
            state.fragment_id = self.fragments.get(self.widgets[key], "") or state.fragment_id
            widget = state.widget_states.widgets.add()
            widget.id = self.widgets[key]
            widget.double_array_value.data.append(float(value))
        await self.ws.send(message.SerializeToString())

    async def _until_progress(self, key: str) -> bool:
        """Until the run's model computation is under way (its progress bar is drawn) and ``key`` is known: True.
        False when the run finished first (a run too quick for its progress bar to reach the browser)."""
        deadline = time.monotonic() + WAIT
        self.progressing = False
        while key not in self.widgets or not self.progressing:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no progress bar (or no slider {key!r})")
            if await self._receive(deadline, {}) and key in self.widgets:
                return False
        return True

    async def _until(self, matches, what: str) -> None:
        """Read messages until a finished run has sent figures for which ``matches(figures)`` holds."""
        deadline = time.monotonic() + WAIT
        figures: dict[str, str] = {}  # digest -> spec, of this run
        while time.monotonic() < deadline:
            if await self._receive(deadline, figures):
                if matches(figures):
                    self.shown = set(figures)
                    self.headings = []
                    return
                figures = {}
                self.headings = []
        raise TimeoutError(f"no {what} within {WAIT:.0f} s")

    async def _receive(self, deadline: float, figures: dict) -> bool:
        """One message; True when it ends a script run."""
        raw = await asyncio.wait_for(self.ws.recv(), timeout=max(deadline - time.monotonic(), 0.1))
        found = {match.decode() for match in self._markers.findall(raw)} if self.others else ()
        self.leaks.extend(other for other in found if other in self.others)
        message = ForwardMsg()
        message.ParseFromString(raw)
        kind = message.WhichOneof("type")
        if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            element = message.delta.new_element
            field = element.WhichOneof("type")
            if field == "exception":
                self.errors.append(f"exception: {element.exception.message[:120]}")
            elif field in FIGURES:
                spec = str(getattr(element, field))
                figures[hashlib.sha1(spec.encode()).hexdigest()] = spec
            elif field == "slider":
                self.widgets[element.slider.id.rsplit("-", 1)[-1]] = element.slider.id
                self.fragments[element.slider.id] = message.delta.fragment_id
            elif field == "progress":
                self.progressing = True
            elif field == "markdown" and (title := heading(element.markdown.body)) is not None:
                self.headings.append(title)
                if self.spec.heading and title != self.spec.heading:  # a lecture student shown another slide
                    self.leaks.append(title)
            elif field in ("button", "bidi_component"):
                widget = getattr(element, field).id
                self.widgets[widget.split("-", 2)[-1]] = widget
        elif kind == "page_info_changed":
            self.address = message.page_info_changed.query_string
        return kind == "script_finished"


def link_query(spec: PageSpec, text: str) -> str:
    """The query string of a student's link to ``spec``: the model, the page's other parameters, the text."""
    params = {"model": spec.model} if spec.model else {}
    params.update(spec.extra)
    if spec.text_key:
        params[spec.text_key] = text
    return urlencode(params)


def percentiles(values: list[float]) -> str:
    if not values:
        return "– / – / –"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):.2f} / {p95:.2f} / {ordered[-1]:.2f}"


async def class_run(
    port: int,
    plan: list[PageSpec],
    run: str,
    *,
    moves: int,
    long=False,
    interrupt=False,
    cold=False,
    maximum=False,
    settle=None,
    pause=0.0,
):
    """Every student at once; ``plan[n]`` is student n's page (a lecture student's, a slide of their own). With
    ``interrupt``, all share one text."""
    plan = spread(plan)
    if interrupt:
        plan = [dataclasses.replace(spec, extra=spec.extra + spec.interrupt_extra) for spec in plan]
    if maximum:
        decoding = [dataclasses.replace(spec, extra=spec.extra + MAXIMUM) for spec in plan]
        plan = [wide if spec.model == DECODER else spec for spec, wide in zip(plan, decoding, strict=True)]
    markers = [marker(run, n) for n in range(len(plan))]
    students = []
    for n, spec in enumerate(plan):
        own = markers[0] if interrupt else markers[n]
        text = sentence(run, 0 if interrupt else n, long=long)
        others = [] if interrupt else [m for m in markers if m != own]
        students.append(Student(port, spec, own, text, others))

    if not cold:  # the teacher opens each page before the class: its imports and model are loaded, as in a lesson
        # (each deck of the lecture: its slides run three models)
        for n, spec in enumerate({(spec.path, dict(spec.extra).get("deck")): spec for spec in plan}.values()):
            await Student(port, spec, marker(run, 900 + n), sentence(run, 900 + n), []).session(0)
        if settle:  # and the class starts once what those first runs started in the background is done
            await asyncio.to_thread(settle)

    async def start(n: int, student: Student):
        if interrupt and n > 0:
            await asyncio.sleep(0.3)  # student 0's run computes the shared result; the others wait on it
        await student.session(moves, interrupt=interrupt and n == 0, pause=pause)

    await asyncio.gather(*(start(n, s) for n, s in enumerate(students)))
    return students


def lowest_priority_chromium(folder: Path) -> str:
    """A launcher that starts Debian's Chromium at the lowest CPU priority (``nice -n 19``, inherited by all its
    processes). In a class the browsers run on the students' machines, not on the server's cores: here one probe
    browser shares the server's two cores, and at normal priority it would take the server's time and the
    measurement would describe the benchmark, not the class. It still draws the page whenever a core is free.

    Playwright starts the browser in a session of its own, and where the kernel groups each session's processes
    for scheduling (``/proc/sys/kernel/sched_autogroup_enabled``, Debian's default) a nice value only ranks
    processes inside their group: the group itself got as much CPU as the server's, half the machine while the
    page loaded. The launcher, that session's first process, lowers its group's weight too."""
    launcher = folder / "chromium-nice"
    launcher.write_text(
        "#!/bin/sh\n[ -w /proc/self/autogroup ] && echo 19 > /proc/self/autogroup 2>/dev/null\n"
        'exec nice -n 19 /usr/bin/chromium "$@"\n'
    )
    launcher.chmod(0o755)
    return str(launcher)


def browsers_during(port: int, spec: PageSpec, count: int, run: str, results: list, *, nice: bool = True) -> None:
    """Real Chromium pages (Debian's) opening the page with their own text while the class runs."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as folder:
        executable = lowest_priority_chromium(Path(folder)) if nice else "/usr/bin/chromium"
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        for n in range(count):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/*", lambda route: route.continue_() if "127.0.0.1" in route.request.url else route.abort())
            start = time.monotonic()
            shown = spread([spec] * (n + 1))[n]  # the lecture: a slide of its own
            page.goto(f"http://127.0.0.1:{port}/{spec.path}?{link_query(shown, sentence(run + 'b', n))}")
            try:
                # (or a lecture slide's question, which hides its view until answered)
                page.wait_for_selector(
                    "[data-testid='stPlotlyChart'] .main-svg, [data-testid='stVegaLiteChart'] canvas, "
                    "[data-testid='stVegaLiteChart'] svg, iframe, .st-key-lecture-choices button",
                    timeout=WAIT * 1000,
                )
                results.append(time.monotonic() - start)
            except Exception:
                results.append(float("nan"))
            page.close()
        browser.close()


def measure(server: Server, name: str, count: int, run: str, args) -> str:
    spec = PAGES.get(name)
    plan = [PAGES[list(PAGES)[n % len(PAGES)]] for n in range(count)] if name == "mix" else [spec] * count
    pages: list[float] = []
    browsers = None
    if args.browsers and name != "mix":
        browsers = threading.Thread(
            target=browsers_during,
            args=(server.port, spec, args.browsers, run, pages),
            kwargs={"nice": not args.browser_priority},
        )
        browsers.start()
    plan = spread(plan)  # the lecture's slides read here, before the class (reading the decks imports torch)
    server.peak = server.peak_rss = 0
    client_cpu = time.process_time()
    students = asyncio.run(
        class_run(
            server.port,
            plan,
            run,
            moves=args.moves,
            long=args.long,
            maximum=args.maximum,
            interrupt=args.interrupt,
            cold=args.cold,
            settle=server.wait_until_quiet,
            pause=args.pause,
        )
    )
    client_cpu = time.process_time() - client_cpu
    if browsers:
        browsers.join(WAIT)
    # The students' side shares the server's cores: say how much of them it took (parsing every message).
    print(f"  {name}: the simulated students used {client_cpu:.1f} s of CPU", flush=True)
    opens = [s.open_to_result for s in students if s.open_to_result is not None]
    moves = [m for s in students for m in s.moves]
    without = sum(s.open_to_result is None for s in students)
    errors, leaks = sum(len(s.errors) for s in students), sum(len(s.leaks) for s in students)
    for s in students:
        for error in s.errors[:1]:
            print(f"  {name} student: {error}", flush=True)
    if args.interrupt:
        stopped = "stopped the shared run" if students[0].interrupted else "came after the run (not an interruption)"
        print(f"  {name}: the interrupting move {stopped}", flush=True)
    chromium = ", ".join(f"{t:.1f}" for t in pages)
    return (
        f"| {name} | {count} | {percentiles(opens)} | {percentiles(moves)} | {errors} | {without} | {leaks} | "
        f"{server.peak / 1e9:.2f} GB ({server.peak_rss / 1e9:.2f} GB) | {chromium} |"
    )


HEADER = [
    "| page | students | open → own result s (p50 / p95 / max) | slider move s (p50 / p95 / max) | errors "
    "| without result | leaks | peak memory: PSS (summed RSS) | chromium during the class: open → figure s |",
    "|---|---|---|---|---|---|---|---|---|",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--page", action="append", choices=[*PAGES, "mix"], help="repeatable; default: the heatmaps")
    parser.add_argument("--mix", action="store_true", help="students spread over every page")
    parser.add_argument("--table", action="store_true", help="every page at 10 and 40 students (the README's table)")
    parser.add_argument("--students", type=int, nargs="+", default=[10, 40])
    parser.add_argument("--moves", type=int, default=3)
    parser.add_argument(
        "--pause", type=float, default=0.0, help="seconds a student reads the page before each slider move (default 0)"
    )
    parser.add_argument("--browsers", type=int, default=2)
    parser.add_argument(
        "--browser-priority",
        action="store_true",
        help="run the Chromium pages at normal CPU priority (default: lowest, as if on the students' machines)",
    )
    parser.add_argument("--interrupt", action="store_true", help="one shared result, interrupted by one student")
    parser.add_argument("--long", action="store_true", help="~500-token texts, all at once")
    parser.add_argument(
        "--maximum", action="store_true", help="the decoding pages at the largest settings a class server allows"
    )
    parser.add_argument(
        "--cold", action="store_true", help="no teacher opens the page first (a fresh server's loads count)"
    )
    parser.add_argument("--profile", metavar="FILE", help="record the server with py-spy (GIL samples) into FILE")
    parser.add_argument(
        "--profile-waits", action="store_true", help="with --profile: every thread's stack, waiting included"
    )
    args = parser.parse_args()
    pages = list(PAGES) if args.table else (args.page or []) + (["mix"] if args.mix else [])
    pages = pages or ["attention_heatmaps"]
    begun = time.monotonic()
    rows = list(HEADER)
    server = Server(args.profile, idle=args.profile_waits)
    try:
        for index, name in enumerate(pages):
            for count in args.students:
                rows.append(measure(server, name, count, f"r{index}n{count}", args))
                print(rows[-1], flush=True)
    finally:
        server.stop()
    print()
    print("\n".join(rows))
    load = os.getloadavg()[0]
    print(f"\n{os.cpu_count()} CPU cores; load average at the end {load:.1f}; total {time.monotonic() - begun:.0f} s")


if __name__ == "__main__":
    main()
