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
prints the table of docs/benchmarks.md. Everything talks to 127.0.0.1 only, and every wait is bounded.

A live class (``--follow``): a teacher client opens the generation deck's first slide on the Lecture page and
starts a class ("Start a live class"; its address then carries the teacher link), and ``--students`` clients open
the student link (``/lecture?class=CODE``) and stay, only listening. The teacher moves one slide every ``--every``
seconds (5) for ``--slides`` moves (10), each a press of the page's keys component as a remote sends it. Per move
and student it records the time from the teacher's page showing the new slide's title to the student's page
showing it (the students' pages rerun when pushed; nothing is sent from them), and from the teacher's press
(p50, p95, max; goal: p95 ≤ 1 s), and how many moves every student followed. Then the class idles ``--idle``
seconds (30) on the last slide: once the servers are quiet after the last move (the slides around it are
computed ahead), each server's CPU (% of one core over its process tree; goal: < 10%) and memory (PSS then,
and its peak). ``--redis``: a redis-server (free port, nothing saved) and two app servers with
``EXPLORER_REDIS_URL``, the teacher on server A, the students alternately on A and B; the same numbers per server
(the teacher's moves reach B's students through Redis), and Redis's own CPU.

Run:  python bench/bench_class.py --page sampling --students 10 40
      python bench/bench_class.py --table
      python bench/bench_class.py --follow --students 40 [--redis]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import re
import shutil
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
from urllib.parse import parse_qs, urlencode

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
TEACHER_PASSPHRASE = "the benchmark's own teacher"  # the server's EXPLORER_TEACHER_PASSPHRASE
FIGURES = ("plotly_chart", "vega_lite_chart", "arrow_vega_lite_chart", "iframe")
ENCODER, DECODER = "sentence-transformers/all-MiniLM-L6-v2", "bundled/prose-llama"  # explorer's defaults


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
    # The chapter's pair (one word changed: she / he), one result for the whole class: a student's own sentence
    # would not tokenize to the corrupted prompt's length.
    "patching": PageSpec("patching", DECODER, None),
    # The page's default text, one attribution for the whole class: integrated gradients runs the model about 150
    # times per text, so forty texts of the students' own would queue for minutes behind the forward gate.
    "why_this_token": PageSpec("why_this_token", DECODER, None),
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
        # A hosted server starts classes for its teacher passphrase's holders only: the benchmark's teacher has it.
        environment.setdefault("EXPLORER_TEACHER_PASSPHRASE", TEACHER_PASSPHRASE)
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

    def observe(self, message: ForwardMsg, kind: str | None) -> None:
        """Each message as it arrives (a live class's clients note when and what; a page's student nothing)."""

    async def _receive(self, deadline: float, figures: dict) -> bool:
        """One message; True when it ends a script run."""
        raw = await asyncio.wait_for(self.ws.recv(), timeout=max(deadline - time.monotonic(), 0.1))
        found = {match.decode() for match in self._markers.findall(raw)} if self.others else ()
        self.leaks.extend(other for other in found if other in self.others)
        message = ForwardMsg()
        message.ParseFromString(raw)
        kind = message.WhichOneof("type")
        self.observe(message, kind)
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
            elif field in ("button", "bidi_component", "text_input"):
                widget = getattr(element, field).id
                self.widgets[widget.split("-", 2)[-1]] = widget
                self.fragments[widget] = message.delta.fragment_id
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


# -- a live class (--follow): the teacher moves, the students' pages follow --------------------------------------

FOLLOW_DECK = "generation"  # its first slide asks a question (a poll), as a class starts
KEYS = "lecture-keys"  # the lecture page's keys component: a remote's or keyboard's press
OPENING = 8  # students opening the class link at once (the rest wait their turn: 2 cores)


@dataclass(frozen=True)
class Drawn:
    """What one finished run drew: its Markdown and HTML bodies in order, and its buttons' and components' keys."""

    texts: tuple[str, ...] = ()
    keys: frozenset[str] = frozenset()

    def shows(self, title: str) -> bool:
        return any(heading(text) == title for text in self.texts)


class ClassClient(Student):
    """A browser tab on the Lecture page of a live class, over Streamlit's protocol: it opens ``query`` (then the
    address the server last gave, as a browser's address bar keeps it), clicks buttons and sets components by
    key, notes when each ``## `` heading (a slide's title) arrived, and keeps what its last finished run drew."""

    def __init__(self, port: int, query: str, *, wait: float = WAIT):
        super().__init__(port, PageSpec("lecture", None, None), own="", text="", others=[])
        self.address = query
        self.wait = wait  # seconds any one step may take
        self.arrivals: list[tuple[float, str]] = []  # (monotonic seconds, title) of every heading received
        self.drawn = Drawn()  # the last finished run's (a fragment's run draws only the fragment)
        self.runs: list[tuple[str, ...]] = []  # the fragments each run started ran alone (none: the whole page)
        self.page = ""  # the page's script hash, once the app's navigation has said it (a browser sends it back)
        self._texts: list[str] = []
        self._keys: set[str] = set()

    def query(self) -> str:
        return self.address

    def _message(self) -> BackMsg:
        message = super()._message()
        message.rerun_script.page_script_hash = self.page
        return message

    def observe(self, message: ForwardMsg, kind: str | None) -> None:
        if kind == "new_session":
            self.runs.append(tuple(message.metadata.run.fragment_ids))
        elif kind == "navigation":
            self.page = message.navigation.page_script_hash
        if kind == "script_finished":
            self.drawn = Drawn(tuple(self._texts), frozenset(self._keys))
            self._texts, self._keys = [], set()
            self.headings = []  # Student's list of the run under way: a class client keeps ``arrivals``
        if kind != "delta" or message.delta.WhichOneof("type") != "new_element":
            return
        element = message.delta.new_element
        field = element.WhichOneof("type")
        if field in ("markdown", "html"):
            body = getattr(element, field).body
            self._texts.append(body)
            if (title := heading(body)) is not None:
                self.arrivals.append((time.monotonic(), title))
        elif field in ("button", "bidi_component"):
            self._keys.add(getattr(element, field).id.split("-", 2)[-1])

    async def open(self, title: str) -> float:
        """Connect and open the page; the seconds until a run has drawn ``title``."""
        begin = time.monotonic()
        self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None, open_timeout=60)
        await self._rerun()
        await self.until(lambda drawn: drawn.shows(title), title)
        return time.monotonic() - begin

    async def close(self) -> None:
        await self.ws.close()

    async def send(self, key: str, state: dict | None = None, *, texts: dict[str, str] | None = None) -> float:
        """A click on button ``key``, or component ``key``'s new ``state``, with text boxes' ``texts`` (by key) as
        typed before it; returns when it was sent."""
        message = self._message()
        message.rerun_script.fragment_id = self.fragments.get(self.widgets[key], "")  # as a browser: that one alone
        for box, text in (texts or {}).items():
            typed = message.rerun_script.widget_states.widgets.add()
            typed.id, typed.string_value = self.widgets[box], text
        widget = message.rerun_script.widget_states.widgets.add()
        widget.id = self.widgets[key]
        if state is None:
            widget.trigger_value = True  # a click: true for one run
        else:
            widget.json_value = json.dumps(state)
        await self.ws.send(message.SerializeToString())
        return time.monotonic()

    async def rerun(self) -> None:
        """A rerun with nothing changed, as a reload of the same session."""
        await self._rerun()

    async def until(self, done, what: str) -> Drawn:
        """Read messages until a finished run's drawing satisfies ``done``; that drawing."""
        deadline = time.monotonic() + self.wait
        while time.monotonic() < deadline:
            if await self._receive(deadline, {}) and done(self.drawn):
                return self.drawn
        raise TimeoutError(f"no {what} within {self.wait:.0f} s")

    async def listen(self, stop: asyncio.Event) -> None:
        """Read every message until ``stop``: a follower's runs come unasked, pushed by the teacher's moves."""
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await self._receive(time.monotonic() + 0.5, {})
        except Exception as error:  # a closed connection: recorded, the class goes on
            self.errors.append(f"listening: {type(error).__name__}: {error}"[:200])

    def arrived(self, title: str, since: float) -> float | None:
        """When heading ``title`` first arrived at or after ``since``; None if it has not."""
        return next((at for at, shown in self.arrivals if shown == title and at >= since), None)


class Teacher(ClassClient):
    """The teacher's tab: opens a slide, starts a class there, and moves by the keys component as a remote does."""

    def __init__(self, port: int, deck, slide: int = 1, *, wait: float = WAIT):
        super().__init__(port, urlencode({"deck": deck.name, "slide": slide}), wait=wait)
        self.deck = deck
        self.seq = 0  # the keys component's press counter, as its JavaScript keeps it

    async def start_class(self) -> str:
        """Type the teacher passphrase and click "Start a live class"; the class's code, once the page's address
        carries the teacher link."""
        await self.send("class_start", texts={"class_passphrase": TEACHER_PASSPHRASE})
        await self.until(lambda drawn: "key=" in self.address, "teacher link")
        return self.code

    @property
    def code(self) -> str:
        return parse_qs(self.address)["class"][0]

    async def press(self, number: int) -> tuple[float, float]:
        """Move to slide ``number``: (when the press was sent, when the teacher's own page got its title)."""
        self.seq += 1
        sent = await self.send(KEYS, {"pressed": {"slide": number, "seq": self.seq}})
        title = self.deck.slide(number).title
        await self.until(lambda drawn: drawn.shows(title), f"slide {number}")
        return sent, self.arrived(title, sent)


@dataclass(frozen=True)
class Followed:
    """One student's view of one teacher's move: seconds from the teacher's page showing the new slide's title,
    and from the teacher's press, to the student's; None when it never came."""

    server: int
    move: int
    from_teacher: float | None
    from_press: float | None


@dataclass(frozen=True)
class ClassRun:
    """A followed class: every (move, student) pair, the students' errors per server, the idle measurement."""

    followed: list[Followed]
    errors: dict[int, list[str]]
    idle_cpu: dict[str, float]  # % of one core over the idle wait, per server ("A", "B", and "redis")
    memory: dict[str, tuple[int, int]]  # bytes, per app server: PSS at the end of the idle wait, peak PSS
    moves: int
    students: int
    settled: float  # seconds the servers took to be quiet after the last move, before the idle measurement


def route(deck, start: int, moves: int) -> list[int]:
    """``moves`` slides from ``start``, one slide a move: forward to the deck's end, then back, and so on."""
    path, at, step = [], start, 1
    for _ in range(moves):
        if not 1 <= at + step <= len(deck):
            step = -step
        at += step
        path.append(at)
    return path


def tree_cpu(process: psutil.Process) -> dict[int, float]:
    """CPU seconds (user + system) of a process and its children, by pid."""
    try:
        tree = [process, *process.children(recursive=True)]
    except psutil.Error:
        return {}
    times = {}
    for member in tree:
        with contextlib.suppress(psutil.Error):
            times[member.pid] = sum(member.cpu_times()[:2])
    return times


def tree_pss(process: psutil.Process) -> int:
    try:
        return sum(resident(member)[0] for member in [process, *process.children(recursive=True)])
    except psutil.Error:
        return 0


def idle_cost(processes: dict[str, psutil.Process], seconds: float) -> dict[str, float]:
    """% of one core each process tree used over ``seconds`` (a child that started meanwhile counts whole)."""
    before = {name: tree_cpu(process) for name, process in processes.items()}
    time.sleep(seconds)
    after = {name: tree_cpu(process) for name, process in processes.items()}
    used = {name: sum(t - before[name].get(pid, 0.0) for pid, t in after[name].items()) for name in processes}
    return {name: 100 * max(cpu, 0.0) / seconds for name, cpu in used.items()}


async def follow_class(servers: list[Server], students: int, moves: int, every: float, idle: float, redis=None):
    """The teacher on ``servers[0]`` starts a class on the deck's first slide; ``students`` followers open its link,
    spread over the servers in turn, and stay; the teacher moves ``moves`` times, one move every ``every``
    seconds; then everyone stays ``idle`` seconds on the last slide while each server's CPU is measured."""
    from explorer.lecture import DECKS

    deck = DECKS[FOLLOW_DECK]
    teacher = Teacher(servers[0].port, deck)
    await teacher.open(deck.slide(1).title)
    code = await teacher.start_class()
    followers = [ClassClient(servers[n % len(servers)].port, urlencode({"class": code})) for n in range(students)]
    errors: dict[int, list[str]] = {n: [] for n in range(len(servers))}
    gate = asyncio.Semaphore(OPENING)

    async def join(follower: ClassClient) -> None:
        async with gate:
            await follower.open(deck.slide(1).title)

    opened = await asyncio.gather(*(join(f) for f in followers), return_exceptions=True)
    joined = [f for f, outcome in zip(followers, opened, strict=True) if outcome is None]
    for n, outcome in enumerate(opened):
        if outcome is not None:
            errors[n % len(servers)].append(f"opening: {type(outcome).__name__}: {outcome}"[:200])
    stop = asyncio.Event()
    listening = [asyncio.create_task(f.listen(stop)) for f in joined]
    presses = []
    try:
        for number in route(deck, 1, moves):
            begin = time.monotonic()
            presses.append((number, *await teacher.press(number)))
            await asyncio.sleep(max(every - (time.monotonic() - begin), 0.0))
        listening.append(asyncio.create_task(teacher.listen(stop)))  # its own reads are done: it idles too
        named = dict(zip("AB", servers, strict=False))
        processes = {name: psutil.Process(server.process.pid) for name, server in named.items()}
        if redis is not None:
            processes["redis"] = psutil.Process(redis.pid)
        # The last move's own work first (the slides around it computed ahead): an idle class's cost is what
        # follows, measured once the servers are quiet (or after 30 s, when they never are).
        settled = max(await asyncio.gather(*(asyncio.to_thread(s.wait_until_quiet) for s in servers)))
        cpu = await asyncio.to_thread(idle_cost, processes, idle)
        memory = {name: (tree_pss(processes[name]), server.peak) for name, server in named.items()}
    finally:
        stop.set()
        await asyncio.gather(*listening, return_exceptions=True)
        await asyncio.gather(*(f.close() for f in [*joined, teacher]), return_exceptions=True)
    followed = []
    for n, follower in enumerate(followers):
        for move, (number, sent, shown) in enumerate(presses):
            seen = follower.arrived(deck.slide(number).title, sent) if follower in joined else None
            from_teacher = None if seen is None or shown is None else seen - shown
            followed.append(Followed(n % len(servers), move, from_teacher, None if seen is None else seen - sent))
        errors[n % len(servers)].extend(follower.errors)
    return ClassRun(followed, errors, cpu, memory, len(presses), students, settled)


def redis_server():
    """Debian's redis-server on a free loopback port, nothing saved to disk, as the tests start it: (URL, process)."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed: `apt-get install redis-server` (tests/run.sh does it)")
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(redis.exceptions.ConnectionError):
            if client.ping():
                client.close()
                return url, process
        time.sleep(0.05)
    process.kill()
    sys.exit(f"redis-server did not answer at {url}")


def warm_for_class(servers: list[Server]) -> None:
    """Each server opens the deck's first slide once (its model loaded, as the teacher's rehearsal), then settles."""
    from explorer.lecture import DECKS

    deck = DECKS[FOLLOW_DECK]

    async def rehearse(server: Server) -> None:
        client = ClassClient(server.port, urlencode({"deck": deck.name, "slide": 1}))
        await client.open(deck.slide(1).title)
        await client.close()

    for server in servers:
        asyncio.run(rehearse(server))
    for server in servers:
        server.wait_until_quiet()


FOLLOW_HEADER = [
    "| server | students | moves every student followed | teacher's page → student's s (p50 / p95 / max) "
    "| teacher's press → student's s (p50 / p95 / max) | idle CPU, % of one core | memory: PSS at idle (peak) "
    "| errors |",
    "|---|---|---|---|---|---|---|---|",
]


def follow_rows(run: ClassRun, servers: int) -> list[str]:
    """The table's rows: one per app server, and the whole class when there are two."""
    rows = []
    groups = [(name, [n]) for n, name in enumerate("AB"[:servers])]
    for name, members in groups + ([("both", list(range(servers)))] if servers > 1 else []):
        chosen = [f for f in run.followed if f.server in members]
        students = sum(1 for n in range(run.students) if n % servers in members)
        every = sum(all(f.from_press is not None for f in chosen if f.move == move) for move in range(run.moves))
        teacher = [f.from_teacher for f in chosen if f.from_teacher is not None]
        press = [f.from_press for f in chosen if f.from_press is not None]
        errors = sum(len(run.errors[n]) for n in members)
        pss, peak = run.memory.get(name, (0, 0))
        memory = f"{pss / 1e9:.2f} GB ({peak / 1e9:.2f} GB)" if name in run.memory else "–"
        redis = f" (Redis {run.idle_cpu['redis']:.1f})" if "redis" in run.idle_cpu else ""
        cpu = f"{run.idle_cpu[name]:.1f}{redis}" if name in run.memory else f"{sum(run.idle_cpu.values()):.1f} in all"
        rows.append(
            f"| {name} | {students} | {every}/{run.moves} | {percentiles(teacher)} | {percentiles(press)} "
            f"| {cpu} | {memory} | {errors} |"
        )
    return rows


def measure_follow(servers: list[Server], students: int, args, redis=None) -> ClassRun:
    run = asyncio.run(follow_class(servers, students, args.slides, args.every, args.idle, redis=redis))
    for server, name in zip(servers, "AB", strict=False):
        for error in run.errors[servers.index(server)][:3]:
            print(f"  server {name} student: {error}", flush=True)
    return run


def follow(args) -> None:
    """``--follow``: one class per student count, on one server or (``--redis``) two sharing a redis-server."""
    redis_url, redis_process = redis_server() if args.redis else (None, None)
    env = {"EXPLORER_REDIS_URL": redis_url} if redis_url else {}
    servers = [Server(args.profile if n == 0 else None, env=env) for n in range(2 if args.redis else 1)]
    rows = list(FOLLOW_HEADER)
    try:
        warm_for_class(servers)
        for count in args.students:
            run = measure_follow(servers, count, args, redis=redis_process)
            rows += follow_rows(run, len(servers))
            teacher = sorted(f.from_teacher for f in run.followed if f.from_teacher is not None)
            p95 = teacher[min(len(teacher) - 1, round(0.95 * (len(teacher) - 1)))] if teacher else float("nan")
            idle = max(run.idle_cpu.get(name, 0.0) for name in "AB")
            print(
                f"  {count} students: p95 {p95:.2f} s (goal ≤ 1 s: {'met' if p95 <= 1 else 'missed'}); "
                f"idle {idle:.1f}% of one core on the busiest server (goal < 10%: {'met' if idle < 10 else 'missed'}; "
                f"measured after the last move's work, {run.settled:.1f} s)",
                flush=True,
            )
    finally:
        for server in servers:
            server.stop()
        if redis_process is not None:
            redis_process.terminate()
            redis_process.wait(10)
    moves = f"the teacher moving every {args.every:g} s for {args.slides} slides, then {args.idle:g} s idle"
    print(f"\n{len(servers)} server(s){' sharing Redis' if args.redis else ''}; {moves}:")
    print("\n".join(rows))


HEADER = [
    "| page | students | open → own result s (p50 / p95 / max) | slider move s (p50 / p95 / max) | errors "
    "| without result | leaks | peak memory: PSS (summed RSS) | chromium during the class: open → figure s |",
    "|---|---|---|---|---|---|---|---|---|",
]


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--page", action="append", choices=[*PAGES, "mix"], help="repeatable; default: the heatmaps")
    parser.add_argument("--mix", action="store_true", help="students spread over every page")
    parser.add_argument("--table", action="store_true", help="every page at 10 and 40 students (docs/benchmarks.md)")
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
    parser.add_argument(
        "--follow", action="store_true", help="a live class: students follow the teacher's slides (--slides, --every)"
    )
    parser.add_argument("--slides", type=int, default=10, help="with --follow: how many moves the teacher makes")
    parser.add_argument("--every", type=float, default=5.0, help="with --follow: seconds between the teacher's moves")
    parser.add_argument("--idle", type=float, default=30.0, help="with --follow: seconds the class idles, measured")
    parser.add_argument("--redis", action="store_true", help="with --follow: two servers sharing a redis-server")
    return parser.parse_args(argv)


def main() -> None:
    args = arguments()
    if args.follow:
        begun = time.monotonic()
        follow(args)
        print(f"\n{os.cpu_count()} CPU cores; load average {os.getloadavg()[0]:.1f}; {time.monotonic() - begun:.0f} s")
        return
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
