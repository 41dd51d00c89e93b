"""The ``explorer`` command of an installed package.

    explorer serve [--hosted] [Streamlit options...]   the app, as ``streamlit run app.py`` from a checkout
    explorer prefetch ID [ID ...]                      fill the Hugging Face cache for a server that must not wait

``serve`` runs the app's own files as installed with the package (``explorer/app``) with the settings of its
``.streamlit/config.toml`` passed as options, since Streamlit reads that file from the working directory only;
options given after ``serve`` are passed on to Streamlit and win. ``--hosted`` turns on hosted mode as the
Docker image does (``EXPLORER_HOSTED=1`` and the image's Streamlit settings: no error details for visitors).
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path

APP_DIR = Path(__file__).resolve().parent / "app"
# What the Docker image sets for a class server (see the Dockerfile): hosted mode, one torch thread per run, and
# visitors see a short error, never a traceback.
HOSTED_ENVIRONMENT = {"EXPLORER_HOSTED": "1", "OMP_NUM_THREADS": "1"}
HOSTED_SETTINGS = {"client": {"showErrorDetails": "none"}}


def app_script() -> Path:
    """The app's entry point: the installed copy, or a checkout's app.py when run from the source tree."""
    installed = APP_DIR / "app.py"
    return installed if installed.exists() else Path(__file__).resolve().parents[1] / "app.py"


def config_options(config_file: Path, overrides: dict | None = None) -> list[str]:
    """``--section.option=value`` for every setting of a Streamlit config file and ``overrides`` (same shape)."""
    settings = tomllib.loads(config_file.read_text(encoding="utf-8")) if config_file.exists() else {}
    for section, options in (overrides or {}).items():
        settings.setdefault(section, {}).update(options)
    return [
        f"--{section}.{option}={_flag_value(value)}"
        for section, options in settings.items()
        for option, value in options.items()
    ]


def _flag_value(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def serve_command(streamlit_options: list[str], *, hosted: bool = False) -> list[str]:
    """The command line that starts the app: the app's own settings first, the caller's options after them."""
    script = app_script()
    defaults = config_options(script.parent / ".streamlit" / "config.toml", HOSTED_SETTINGS if hosted else None)
    return [sys.executable, "-m", "streamlit", "run", str(script), *defaults, *streamlit_options]


def serve_environment(hosted: bool, environ=None) -> dict[str, str]:
    environ = dict(os.environ if environ is None else environ)
    if hosted:
        environ.update(HOSTED_ENVIRONMENT)
    return environ


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="explorer", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", metavar="{serve,prefetch}")
    serve = commands.add_parser(
        "serve",
        help="start the app (Streamlit options such as --server.port 8502 are passed on)",
        description="Start the app. Options other than --hosted are passed on to `streamlit run`.",
    )
    serve.add_argument("--hosted", action="store_true", help="hosted mode, as on a class server (see the README)")
    prefetch = commands.add_parser(
        "prefetch",
        help="download Hub models into the Hugging Face cache",
        description="Download models into the Hugging Face cache ahead of time, loaded the way the app loads them.",
    )
    prefetch.add_argument("models", nargs="+", metavar="ID", help="Hugging Face Hub ids")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.command == "serve":
        command = serve_command(rest, hosted=args.hosted)
        os.execve(sys.executable, command, serve_environment(args.hosted))
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "prefetch":
        from explorer.prefetch import prefetch

        return 1 if prefetch(args.models) else 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
