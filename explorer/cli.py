"""The ``explorer`` command of an installed package.

    explorer serve [--hosted] [Streamlit options...]   the app, as ``streamlit run app.py`` from a checkout
    explorer prefetch ID [ID ...]                      fill the Hugging Face cache for a server that must not wait
    explorer health                                    the server's settings and its class store, checked
    explorer deck export --deck NAME --format pdf|pptx|html [--paper a4|letter] [--output PATH]
                                                       a lecture deck as one file to hand out

``serve`` runs the app's own files as installed with the package (``explorer/app``: app.py, pages/ and the app's
``.streamlit/config.toml``, which Streamlit reads beside the script it runs, from any working directory, with the
same precedence as in a checkout: environment variables and options win over it). Options after ``serve`` are
passed on to ``streamlit run``. ``--hosted`` sets what the Docker image sets for a class server.

``deck export`` writes the file the Lecture page's download button gives (``explorer.lecture.files``), named after
the deck, its models and the day unless ``--output`` says otherwise (a folder: that name in it), and prints the
path it wrote. A destination it cannot write (a missing folder, no permission) is refused before the deck is
drawn, which takes a minute: one line on stderr, status 2. Text that came from the command line or the Hub is
printed with its control characters shown, never sent to the terminal as escape sequences.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

from explorer import settings
from explorer.checks import printable
from explorer.render.deckfile import FORMATS as DECK_FORMATS
from explorer.render.deckfile import PAPERS as DECK_PAPERS

APP_DIR = Path(__file__).resolve().parent / "app"
# The Dockerfile's environment for a class server (tests/test_cli.py holds the two equal): hosted mode, its
# parameter cap, one torch thread per run, glibc returning freed memory, visitors shown no tracebacks.
HOSTED_ENVIRONMENT = {
    "EXPLORER_HOSTED": "1",
    "EXPLORER_MAX_PARAMS": "200000000",
    "OMP_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
    "MALLOC_MMAP_THRESHOLD_": "131072",
    "MALLOC_TRIM_THRESHOLD_": "131072",
    "STREAMLIT_CLIENT_SHOW_ERROR_DETAILS": "none",
    "STREAMLIT_RUNNER_POST_SCRIPT_GC": "false",
    "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none",
    "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
}


def app_script() -> Path:
    """The app's entry point: the installed copy, or a checkout's app.py when run from the source tree."""
    installed = APP_DIR / "app.py"
    return installed if installed.exists() else Path(__file__).resolve().parents[1] / "app.py"


def serve_command(streamlit_options: list[str]) -> list[str]:
    """``python -P -m streamlit run <app.py> <options>``.

    ``-P``: the working directory stays off ``sys.path``, so a folder named ``explorer`` there (a checkout, say)
    never stands in for the installed package.
    """
    return [sys.executable, "-P", "-m", "streamlit", "run", str(app_script()), *streamlit_options]


def serve_environment(hosted: bool, environ=None) -> dict[str, str]:
    """The server's environment: ``environ``, plus the hosted settings it does not set itself when ``hosted``."""
    environ = dict(os.environ if environ is None else environ)
    if hosted:
        environ = {**HOSTED_ENVIRONMENT, **environ, "EXPLORER_HOSTED": "1"}
    return environ


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="explorer", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", metavar="{serve,prefetch,health,deck}")
    commands.add_parser(
        "serve",
        usage="%(prog)s [-h] [--hosted] [Streamlit options...]",
        help="start the app (Streamlit options such as --server.port 8502 are passed on)",
        description=(
            "Start the app: `streamlit run` on the installed app.py with its own settings. Every option other "
            "than --hosted is passed on to `streamlit run` (see `streamlit run --help`), e.g. "
            "--server.port 8502 --server.address 127.0.0.1."
        ),
        allow_abbrev=False,  # an abbreviation of --hosted must not swallow a Streamlit option
    ).add_argument(
        "--hosted",
        action="store_true",
        help="hosted mode with the Docker image's settings, as on a class server (docs/hosting.md)",
    )
    commands.add_parser(
        "prefetch",
        help="download Hub models into the Hugging Face cache",
        description=(
            "Download models into the Hugging Face cache ahead of time, loaded the way the app loads them "
            "(Hub ids only; exits with status 1 if any could not be fetched)."
        ),
    ).add_argument("models", nargs="+", metavar="ID", help="Hugging Face Hub ids")
    commands.add_parser(
        "health",
        help="check the settings and the live classes' store",
        description=(
            "Check what a server needs beyond Streamlit's own /_stcore/health, with this environment: its "
            "EXPLORER_* settings, and whether the live classes' store (EXPLORER_REDIS_URL, else this process) "
            "answers. One line each; status 1 when something is wrong."
        ),
    )
    deck = commands.add_parser("deck", help="lecture decks as files", description="Lecture decks as files.")
    export = deck.add_subparsers(dest="deck_command", metavar="{export}", required=True).add_parser(
        "export",
        help="write a deck as one PDF, PPTX or HTML file",
        description=(
            "Write a lecture deck as one file: PDF (a 16:9 page per slide, the views as vector drawings), PPTX "
            "(a slide per slide, the views as 3840x2160 pictures, speaker notes) or HTML (one offline page, "
            "interactive views, arrow keys). A question comes as two pages: the question, then the answer. "
            "Offline, on the bundled models; prints the path written."
        ),
    )
    export.add_argument("--deck", required=True, type=_deck_name, metavar="NAME", help="the deck, e.g. generation")
    export.add_argument("--format", required=True, choices=DECK_FORMATS, help="the file's format")
    export.add_argument(
        "--paper",
        default="a4",
        choices=DECK_PAPERS,
        help="the PDF's paper, landscape (default: a4; PPTX and HTML: 16:9)",
    )
    export.add_argument(
        "--output",
        type=Path,
        metavar="PATH",
        help="where to write it: a file, or a folder to write DECK-deck_MODELS_DATE.FORMAT in (default: that name, "
        "here); checked before the deck is drawn",
    )
    return parser


def _deck_name(name: str) -> str:
    """A deck's name, checked when given (the decks import the models' code: only this command pays for it)."""
    from explorer.lecture import DECKS

    if name not in DECKS:
        raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {', '.join(map(repr, DECKS))})")
    return name


def export_deck_file(name: str, fmt: str, output: Path | None, paper: str = "a4") -> int:
    """Write the deck's file, saying slide by slide how far it is (on stderr); its path on stdout."""
    from explorer.lecture import DECKS
    from explorer.lecture.files import deck_file_name, deck_models, export_deck
    from explorer.render import renderer
    from explorer.render.export import ExportUnavailable

    deck = DECKS[name]
    try:
        path = deck_destination(output, deck_file_name(deck, fmt, deck_models(deck), datetime.date.today()))
    except Unwritable as error:
        return _fail(error, status=2)
    try:
        data = export_deck(
            deck, fmt, paper=paper, progress=lambda done, total: print(f"slide {done} of {total}", file=sys.stderr)
        )
    except (renderer.RenderFailed, ExportUnavailable) as error:
        return _fail(error)
    finally:
        renderer.pool().close()  # the worker and its Chrome end with the command
    try:
        path.write_bytes(data)
    except OSError as error:  # the disk filled up, or the folder changed while the deck was drawn
        return _fail(f"cannot write {path} ({error.strerror or error}).")
    print(path)
    return 0


class Unwritable(ValueError):
    """``--output`` names a place the deck's file cannot be written: the sentence says why and what to do."""


def deck_destination(output: Path | None, default_name: str) -> Path:
    """The file to write: ``output``, ``default_name`` in it when it is a folder, or ``default_name`` here.
    ``Unwritable`` when its folder is missing or not writable, or the file is there and not writable: checked
    before the deck is drawn (20 to 75 seconds), not after."""
    path = Path(default_name) if output is None else output / default_name if output.is_dir() else output
    folder = path.parent
    if not folder.is_dir():
        missing = "is not a folder" if folder.exists() else "does not exist"
        raise Unwritable(f"--output: {folder} {missing}. Create the folder first, or give another --output.")
    if path.exists() and not os.access(path, os.W_OK):
        raise Unwritable(f"--output: {path} cannot be written over (permission denied). Give another --output.")
    if not path.exists() and not os.access(folder, os.W_OK | os.X_OK):
        raise Unwritable(f"--output: no file can be made in {folder} (permission denied). Give another --output.")
    return path


def _fail(error: object, *, status: int = 1) -> int:
    """One line on stderr, its control characters shown (a path or a message may hold escape sequences)."""
    print(f"explorer deck export: {printable(error)}", file=sys.stderr)
    return status


def health() -> int:
    """``explorer health``: the settings' problems and the class store's answer, a line each (status 1 if any is
    wrong)."""
    from explorer.classroom import state

    wrong = settings.problems()
    for problem in wrong:
        print(f"settings: {printable(problem)}")
    if not wrong:
        print("settings: fine")
        answers, said = state.health()
        print(f"class store: {printable(said)}")
        wrong = [] if answers else [said]
    return 1 if wrong else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    # Only what follows `serve` goes to Streamlit: `explorer` itself takes no options but --help.
    before = argv[: argv.index(args.command)] if args.command else rest
    if before or (rest and args.command != "serve"):
        parser.error(f"unrecognized arguments: {printable(' '.join(before or rest))}")
    if args.command == "serve":
        environment = serve_environment(args.hosted)
        if wrong := settings.problems(environment):  # before Streamlit starts, not as every visitor's page
            for problem in wrong:
                print(f"explorer serve: {printable(problem)}", file=sys.stderr)
            return 2
        os.execve(sys.executable, serve_command(rest), environment)
    if args.command == "prefetch":
        from explorer.prefetch import prefetch

        return 1 if prefetch(args.models) else 0
    if args.command == "deck":
        return export_deck_file(args.deck, args.format, args.output, args.paper)
    if args.command == "health":
        return health()
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
