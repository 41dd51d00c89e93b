"""Next / previous slide on the Lecture page: one presenter walks both decks, each move timed.

The presenter is a websocket client speaking Streamlit's protocol (``bench_class.Student``'s, so the server is
measured, not a browser). It opens ``/lecture?deck=anatomy&slide=1``, walks the deck forward to its last slide
and back to the first, one slide a move, then does the same in a new session on the generation deck. Each move
is timed from the ``BackMsg`` that asks for it until the end of the run that drew the new slide's title and its
figure. A question slide (``--questions live``, the default) first shows its question, as in a lecture: its move
ends with the run that drew the question (the result the choices come from is computed by then); after the
pause the presenter clicks an answer, timed apart as a reveal until the view is drawn, and on the way back the
answered slide draws its view. ``--questions link`` reveals every question through the opening link's
``answers`` instead (each move then waits for a figure; but the page's score then computes every answered
slide's result in the first run, so the question slides are no longer cold), ``--questions asked`` never
answers. A move is what a remote sends, alternately (``--press``): the keys' component's state ``{slide, seq}``,
as the page's JavaScript sets it on → / PageDown, and a click on the slide's own next / previous button. Between
moves the presenter talks ``--pause`` seconds (2 by default): the time the page has to compute the next slide
ahead.

Variants, each on a fresh server (hosted mode, offline, 127.0.0.1; the results cache cold): ``ahead`` (the page
as it is: while a slide shows, ``explorer.lecture.ahead`` computes the next and previous slides in the
background) and ``now`` (the server started with ``EXPLORER_LECTURE_AHEAD=0``: each slide is computed when the
presenter reaches it). Before walking, the server is warm: every model the decks run is loaded by opening a
page with a text no slide uses, and the export worker the first figure starts has settled.

Run:  python bench/bench_lecture.py
      python bench/bench_lecture.py --deck generation --variant ahead --pause 1
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import websockets

from bench import bench_class
from bench.bench_class import DECODER, PAGES, PageSpec, Server, Student, percentiles
from explorer.lecture import DECKS

KEYS = "lecture-keys"  # the page's keys component
VARIANTS = {"ahead": {}, "now": {"EXPLORER_LECTURE_AHEAD": "0"}}
QUESTIONS = {
    "live": "a move to a question slide waits for its question; after the pause the presenter clicks an answer, "
    "timed apart (reveal) until the view is drawn; an answered slide's move waits for its figure",
    "link": "every question revealed by the opening link (answers=): each move waits for the slide's figure",
    "asked": "questions never answered: a question slide's move waits for its question, its view stays hidden",
}
PRESSES = {"alternate": ("keys", "button"), "keys": ("keys",), "button": ("button",)}


@dataclass(frozen=True)
class Move:
    variant: str
    deck: str
    start: int
    to: int
    press: str  # "keys" (the keys component's state), "button" (the slide's own arrow) or "reveal" (an answer)
    seconds: float
    title: str


def click(widget) -> None:
    """A button's click: its trigger, true for one run."""
    widget.trigger_value = True


class Presenter(Student):
    """One presenter on one deck: opens its first slide, then moves one slide at a time as a remote does.

    ``questions``: ``live`` (a question slide shows its question; after the pause the presenter clicks its first
    choice, timed apart as a reveal, and the slide draws its view from then on), ``link`` (every question
    revealed by the opening link's ``answers``) or ``asked`` (never answered: the view stays hidden)."""

    def __init__(self, port: int, deck, *, questions: str = "live"):
        answers = (("answers", bench_class.revealed(deck)),) if questions == "link" else ()
        spec = PageSpec("lecture", None, None, extra=(("deck", deck.name), ("slide", "1"), *answers))
        super().__init__(port, spec, own="", text="", others=[])
        self.deck, self.questions = deck, questions
        asking = [n for n, slide in enumerate(deck.slides, 1) if slide.question is not None]
        self.answered = set(asking) if questions == "link" else set()
        self.at = 1
        self.seq = 0  # the keys component's press counter, as its JavaScript keeps it

    def query(self) -> str:
        """The address the server last wrote (deck, slide, answers), as the browser's address bar holds it."""
        return self.address or super().query()

    def shows(self, number: int):
        """Whether a finished run drew slide ``number``: its title, and its figure unless its question hides it."""
        slide = self.deck.slide(number)
        hidden = slide.question is not None and number not in self.answered
        return lambda figures: slide.title in self.headings and (hidden or bool(figures))

    async def _send(self, key: str, fill) -> float:
        """One widget changed (``fill`` sets its value); the seconds until a run has drawn the slide it asks for."""
        message = self._message()
        widget = message.rerun_script.widget_states.widgets.add()
        widget.id = self.widgets[key]
        fill(widget)
        begin = time.monotonic()
        await self.ws.send(message.SerializeToString())
        await self._until(self.shows(self.at), f"slide {self.at}")
        return time.monotonic() - begin

    async def press(self, target: int, how: str) -> float:
        """Move to ``target`` (the next or previous slide); the seconds until its run has drawn it."""
        if how == "keys":
            self.seq += 1
            press = json.dumps({"pressed": {"slide": target, "seq": self.seq}})
            key, fill = KEYS, lambda widget: setattr(widget, "json_value", press)
        else:
            key, fill = "next" if target > self.at else "previous", click
        self.at = target
        return await self._send(key, fill)

    async def reveal(self) -> float:
        """Answer the slide's question with its first choice; the seconds until its view is drawn."""
        self.answered.add(self.at)
        return await self._send("choice-0", click)

    async def walk(self, variant: str, pause: float, presses: tuple[str, ...], route=None) -> list[Move]:
        """Through ``route`` (slide numbers, each next to the one before; by default forward to the last slide and
        back to the first); returns the moves and reveals made (fewer when one failed: see ``errors``)."""
        moves: list[Move] = []
        last = len(self.deck)
        route = route or [*range(2, last + 1), *range(last - 1, 0, -1)]
        try:
            async with websockets.connect(self.url, subprotocols=["streamlit"], max_size=None, open_timeout=60) as ws:
                self.ws = ws
                begin = time.monotonic()
                await self._rerun()
                await self._until(self.shows(1), "slide 1")
                self.open_to_result = time.monotonic() - begin
                moves += await self._answer(variant, pause)
                for n, target in enumerate(route):
                    await asyncio.sleep(pause)  # the presenter talks; the page computes ahead
                    how, start = presses[n % len(presses)], self.at
                    seconds = await self.press(target, how)
                    moves.append(Move(variant, self.deck.name, start, target, how, seconds, self.title()))
                    moves += await self._answer(variant, pause)
        except Exception as error:  # recorded and printed: the other deck and variant still run
            self.errors.append(f"{type(error).__name__}: {error}"[:200])
        return moves

    async def _answer(self, variant: str, pause: float) -> list[Move]:
        """On a question slide not answered yet (``live``): the room answers, then the presenter reveals."""
        if self.questions != "live" or self.deck.slide(self.at).question is None or self.at in self.answered:
            return []
        await asyncio.sleep(pause)
        seconds = await self.reveal()
        return [Move(variant, self.deck.name, self.at, self.at, "reveal", seconds, self.title())]

    def title(self) -> str:
        return self.deck.slide(self.at).title


def warm(server: Server) -> None:
    """Load every model the decks run, through pages and texts no slide uses (the results cache stays cold for
    the slides), then wait until the server is quiet (the first figure starts the export worker). The sampling
    page draws a Vega-Lite chart: a fresh server's first one costs 0.4 s more (pyarrow's first table)."""
    models = {getattr(slide.view, "model", None) for deck in DECKS.values() for slide in deck.slides} - {None}
    heatmaps = PAGES["attention_heatmaps"]
    specs = [dataclasses.replace(heatmaps, model=model) for model in sorted(models - {DECODER})]
    specs += [PAGES["greedy_search"], PAGES["sampling"]]

    async def open_all():
        for n, spec in enumerate(specs):
            student = Student(server.port, spec, bench_class.marker("w", n), bench_class.sentence("w", n), [])
            await student.session(0)
            for error in student.errors:
                print(f"  warming {spec.model}: {error}", flush=True)

    asyncio.run(open_all())
    server.wait_until_quiet()


def run_variant(variant: str, decks: list, args) -> list[Move]:
    server = Server(env=VARIANTS[variant])
    moves: list[Move] = []
    try:
        begun = time.monotonic()
        warm(server)
        print(f"{variant}: server warm in {time.monotonic() - begun:.0f} s", flush=True)
        for deck in decks:
            presenter = Presenter(server.port, deck, questions=args.questions)
            walked = asyncio.run(presenter.walk(variant, args.pause, PRESSES[args.press]))
            moves += walked
            for error in presenter.errors:
                print(f"  {variant} {deck.name}: {error}", flush=True)
            opened = f"{presenter.open_to_result:.2f} s" if presenter.open_to_result is not None else "–"
            taken = [m.seconds for m in walked if m.press != "reveal"]
            print(f"  {variant} {deck.name}: opened in {opened}; {len(taken)} moves, {percentiles(taken)}", flush=True)
    finally:
        server.stop()
    return moves


def table(moves: list[Move], variants: list[str], decks: list) -> list[str]:
    rows = [
        "| variant | deck | moves | next s (p50 / p95 / max) | previous s (p50 / p95 / max) "
        "| all s (p50 / p95 / max) |",
        "|---|---|---|---|---|---|",
    ]
    for variant in variants:
        for deck in [d.name for d in decks] + (["both"] if len(decks) > 1 else []):
            chosen = [m for m in moves if m.variant == variant and deck in (m.deck, "both") and m.press != "reveal"]
            forward = [m.seconds for m in chosen if m.to > m.start]
            back = [m.seconds for m in chosen if m.to < m.start]
            every = forward + back
            rows.append(
                f"| {variant} | {deck} | {len(every)} | {percentiles(forward)} | {percentiles(back)} "
                f"| {percentiles(every)} |"
            )
    return rows


def by_press(moves: list[Move], variants: list[str]) -> list[str]:
    rows = ["| variant | press | moves | s (p50 / p95 / max) |", "|---|---|---|---|"]
    for variant in variants:
        for press in sorted({m.press for m in moves}):
            chosen = [m.seconds for m in moves if m.variant == variant and m.press == press]
            rows.append(f"| {variant} | {press} | {len(chosen)} | {percentiles(chosen)} |")
    return rows


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deck", action="append", choices=list(DECKS), help="repeatable; default: both")
    parser.add_argument("--variant", action="append", choices=list(VARIANTS), help="repeatable; default: both")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds the presenter talks before each move")
    parser.add_argument("--press", choices=list(PRESSES), default="alternate", help="what a move sends")
    parser.add_argument(
        "--questions",
        choices=list(QUESTIONS),
        default="live",
        help="live: asked, then revealed by a click (timed apart); link: revealed by the opening link; asked: never",
    )
    parser.add_argument("--slowest", type=int, default=5, help="how many of the slowest moves to list")
    args = parser.parse_args()
    decks = [DECKS[name] for name in args.deck or DECKS]
    variants = args.variant or list(VARIANTS)
    shown = QUESTIONS[args.questions]
    print(f"One presenter; {args.pause:g} s between moves; presses: {args.press}; {shown}.", flush=True)
    begun = time.monotonic()
    moves = [move for variant in variants for move in run_variant(variant, decks, args)]
    print()
    print("\n".join(table(moves, variants, decks)))
    print()
    print("\n".join(by_press(moves, variants)))
    for variant in variants:
        print(f"\nSlowest moves, {variant}:")
        made = [m for m in moves if m.variant == variant and m.press != "reveal"]
        for move in sorted(made, key=lambda m: -m.seconds)[: args.slowest]:
            print(f"  {move.seconds:6.2f} s  {move.deck} {move.start} → {move.to} ({move.press}): {move.title}")
    if set(VARIANTS) <= set(variants):
        ahead, now = ([m.seconds for m in moves if m.variant == v and m.press != "reveal"] for v in ("ahead", "now"))
        if ahead and now:
            print(
                f"\nComputing ahead: p95 {p95(ahead):.2f} s against {p95(now):.2f} s without "
                f"({p95(now) / p95(ahead):.1f}x); median {statistics.median(ahead):.2f} s against "
                f"{statistics.median(now):.2f} s ({statistics.median(now) / statistics.median(ahead):.1f}x)."
            )
    load = os.getloadavg()[0]
    print(f"\n{os.cpu_count()} CPU cores; load average at the end {load:.1f}; total {time.monotonic() - begun:.0f} s")


if __name__ == "__main__":
    main()
