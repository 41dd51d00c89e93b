"""The ``explorer`` command's argument handling: what command line and environment each invocation starts.

``os.execve`` is replaced by a recorder, so nothing is started; tests/test_package.py runs the real thing from an
installed wheel.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from explorer import cli
from tests.browser import ROOT


class Started(Exception):
    """Raised by the recorder in place of ``os.execve``, which never returns."""


@pytest.fixture
def started(monkeypatch):
    """What ``explorer serve`` would exec: {"path", "argv", "env"}."""
    record = {}

    def execve(path, argv, env):
        record.update(path=path, argv=argv, env=env)
        raise Started

    monkeypatch.setattr(cli.os, "execve", execve)
    return record


def serve(started, *args) -> dict:
    with pytest.raises(Started):
        cli.main(["serve", *args])
    return started


def test_serve_runs_streamlit_on_this_checkouts_app_and_passes_options_on_in_order(started):
    run = serve(started, "--server.port", "9000", "--theme.base=dark", "--", "--a-script-argument")
    assert run["path"] == sys.executable
    assert run["argv"] == [
        sys.executable, "-P", "-m", "streamlit", "run", str(ROOT / "app.py"),
        "--server.port", "9000", "--theme.base=dark", "--", "--a-script-argument",
    ]  # fmt: skip
    assert run["env"] == dict(os.environ)  # locally: nothing added, the app's config.toml does the rest


def test_serve_without_options_is_streamlit_run_app_py(started):
    assert serve(started)["argv"][2:] == ["-m", "streamlit", "run", str(ROOT / "app.py")]


def test_hosted_is_taken_wherever_it_stands_and_never_passed_on(started):
    for args in (["--hosted", "--server.port", "1"], ["--server.port", "1", "--hosted"]):
        run = serve(started, *args)
        assert run["argv"][-2:] == ["--server.port", "1"] and "--hosted" not in run["argv"]
        assert run["env"]["EXPLORER_HOSTED"] == "1"


def test_an_abbreviation_is_passed_on_to_streamlit_not_taken_for_hosted(started):
    run = serve(started, "--hos")
    assert run["argv"][-1] == "--hos" and "EXPLORER_HOSTED" not in run["env"]


def test_hosted_sets_the_docker_images_environment_unless_the_caller_set_it(started, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOSTED", "0")
    monkeypatch.setenv("EXPLORER_MAX_PARAMS", "500000000")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = serve(started, "--hosted")["env"]
    assert env["EXPLORER_HOSTED"] == "1"  # --hosted means hosted
    assert env["EXPLORER_MAX_PARAMS"] == "500000000"  # the caller's own choice is kept
    assert env["OMP_NUM_THREADS"] == "1" and env["STREAMLIT_CLIENT_SHOW_ERROR_DETAILS"] == "none"
    assert env["PATH"] == os.environ["PATH"]


def test_hosted_environment_is_the_dockerfiles():
    DockerfileParser = pytest.importorskip("dockerfile_parse").DockerfileParser
    image = DockerfileParser(path=str(ROOT / "Dockerfile")).envs
    image_only = {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK"}
    image_only |= {"HOME", "HF_HOME"}  # the container's user and cache folders
    assert {key: value for key, value in image.items() if key not in image_only} == cli.HOSTED_ENVIRONMENT


def test_prefetch_loads_each_id_and_fails_when_any_failed(monkeypatch):
    import explorer.prefetch

    asked = []
    monkeypatch.setattr(explorer.prefetch, "prefetch", lambda names: asked.append(names) or len(names) - 1)
    assert cli.main(["prefetch", "openai-community/gpt2"]) == 0
    assert cli.main(["prefetch", "openai-community/gpt2", "bert-base-uncased"]) == 1
    assert asked == [["openai-community/gpt2"], ["openai-community/gpt2", "bert-base-uncased"]]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["prefetch"], "the following arguments are required: ID"),
        (["prefetch", "gpt2", "--revision"], "unrecognized arguments: --revision"),
        (["launch"], "invalid choice: 'launch'"),
        (["--hosted", "serve"], "unrecognized arguments: --hosted"),
        (["deck"], "the following arguments are required: {export}"),
        (["deck", "export", "--format", "pdf"], "the following arguments are required: --deck"),
        (["deck", "export", "--deck", "nope", "--format", "pdf"], "argument --deck: invalid choice: 'nope'"),
        (["deck", "export", "--deck", "generation", "--format", "key"], "argument --format: invalid choice: 'key'"),
        (
            ["deck", "export", "--deck", "anatomy", "--format", "pdf", "--paper", "a5"],
            "argument --paper: invalid choice: 'a5'",
        ),
    ],
)
def test_mistakes_exit_with_status_2_and_say_what_is_wrong(argv, message, capsys, started):
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    assert exit.value.code == 2 and message in capsys.readouterr().err
    assert started == {}  # nothing was started


def test_no_command_prints_the_help(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: explorer") and "serve" in out and "prefetch" in out and "deck" in out


@pytest.fixture
def deck_exports(monkeypatch):
    """``export_deck`` replaced by a recorder that reports progress on two slides and gives b"the file"."""
    import explorer.lecture.files

    asked = []

    def export_deck(deck, fmt, *, paper="a4", progress=None):
        asked.append((deck.name, fmt, paper))
        for done in (1, 2):
            progress(done, 2)
        return b"the file"

    monkeypatch.setattr(explorer.lecture.files, "export_deck", export_deck)
    return asked


def test_deck_export_writes_the_deck_named_file_here_and_prints_its_path(deck_exports, tmp_path, monkeypatch, capsys):
    import datetime

    from explorer.lecture import GENERATION
    from explorer.lecture.files import deck_file_name, deck_models

    monkeypatch.chdir(tmp_path)
    assert cli.main(["deck", "export", "--deck", "generation", "--format", "pptx"]) == 0
    name = deck_file_name(GENERATION, "pptx", deck_models(GENERATION), datetime.date.today())
    assert name.startswith("generation-deck_") and name.endswith(".pptx")
    out, err = capsys.readouterr()
    assert out == f"{name}\n" and (tmp_path / name).read_bytes() == b"the file"
    assert "slide 1 of 2" in err and "slide 2 of 2" in err
    assert deck_exports == [("generation", "pptx", "a4")]


def test_deck_export_writes_where_output_says(deck_exports, tmp_path, capsys):
    output = tmp_path / "handout.pdf"
    assert cli.main(["deck", "export", "--deck", "anatomy", "--format", "pdf", "--output", str(output)]) == 0
    assert capsys.readouterr().out == f"{output}\n" and output.read_bytes() == b"the file"


def test_deck_export_prints_on_the_paper_asked_for(deck_exports, tmp_path, capsys):
    output = tmp_path / "handout.pdf"
    argv = ["deck", "export", "--deck", "anatomy", "--format", "pdf", "--paper", "letter", "--output", str(output)]
    assert cli.main(argv) == 0
    assert deck_exports == [("anatomy", "pdf", "letter")]


def test_a_deck_that_cannot_be_drawn_exits_1_with_the_sentence_and_writes_nothing(monkeypatch, tmp_path, capsys):
    import explorer.lecture.files
    from explorer.render.renderer import RenderFailed

    def export_deck(deck, fmt, *, paper="a4", progress=None):
        raise RenderFailed("Slide 3 of the Text generation deck could not be drawn.")

    monkeypatch.setattr(explorer.lecture.files, "export_deck", export_deck)
    output = tmp_path / "deck.pdf"
    assert cli.main(["deck", "export", "--deck", "generation", "--format", "pdf", "--output", str(output)]) == 1
    assert "Slide 3 of the Text generation deck could not be drawn." in capsys.readouterr().err
    assert not output.exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--help"], "explorer serve [--hosted] [Streamlit options...]"),
        (["serve", "--help"], "passed on to `streamlit run`"),
        (["prefetch", "--help"], "Download models into the Hugging Face cache"),
        (["--help"], "explorer deck export --deck NAME --format pdf|pptx|html [--paper a4|letter] [--output PATH]"),
        (["deck", "export", "--help"], "A question comes as two pages: the question, then the answer."),
        (["deck", "export", "--help"], "the PDF's paper, landscape (default: a4; PPTX and HTML: 16:9)"),
    ],
)
def test_help_says_what_each_command_does(argv, says, capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert exit.value.code == 0 and " ".join(says.split()) in out


# -- bad destinations and escape sequences (issue 39): refused before the deck is drawn, in one line -------------


@pytest.fixture
def draws_nothing(monkeypatch):
    """Drawing the deck (20 to 75 s) fails the test: a bad destination is refused first."""
    import explorer.lecture.files

    monkeypatch.setattr(explorer.lecture.files, "export_deck", lambda *a, **k: pytest.fail("drew the deck"))


def _unwritable(monkeypatch, path):
    """``path`` refuses writing as it does for a user without permission there (root may write anywhere, so the
    permission check, os.access, is told so)."""
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(path) else real(p, mode))


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("missing", "missing does not exist. Create the folder first"),
        ("file-as-folder", "notes.txt is not a folder"),
        ("unwritable-folder", "no file can be made in"),
        ("unwritable-file", "cannot be written over (permission denied)"),
    ],
)
def test_a_destination_that_cannot_be_written_is_refused_before_drawing(
    draws_nothing, tmp_path, monkeypatch, capsys, where, says
):
    (tmp_path / "notes.txt").write_text("a file")
    (tmp_path / "locked").mkdir()
    (tmp_path / "kept.pdf").write_bytes(b"kept")
    output = {
        "missing": tmp_path / "missing" / "deck.pdf",
        "file-as-folder": tmp_path / "notes.txt" / "deck.pdf",
        "unwritable-folder": tmp_path / "locked" / "deck.pdf",
        "unwritable-file": tmp_path / "kept.pdf",
    }[where]
    _unwritable(monkeypatch, {"unwritable-folder": tmp_path / "locked", "unwritable-file": output}.get(where))
    assert cli.main(["deck", "export", "--deck", "generation", "--format", "pdf", "--output", str(output)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("explorer deck export: --output: ")
    assert says in err and "Traceback" not in err
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["kept.pdf", "locked", "notes.txt"]  # nothing new
    assert (tmp_path / "kept.pdf").read_bytes() == b"kept"


def test_a_folder_as_destination_gets_the_decks_own_name_in_it(deck_exports, tmp_path, capsys):
    import datetime

    from explorer.lecture import GENERATION
    from explorer.lecture.files import deck_file_name, deck_models

    assert cli.main(["deck", "export", "--deck", "generation", "--format", "html", "--output", str(tmp_path)]) == 0
    written = tmp_path / deck_file_name(GENERATION, "html", deck_models(GENERATION), datetime.date.today())
    assert capsys.readouterr().out == f"{written}\n" and written.read_bytes() == b"the file"


def test_a_destination_with_escape_sequences_is_named_with_them_shown(draws_nothing, tmp_path, capsys):
    output = tmp_path / "\x1b]0;pwned\x07" / "deck.pdf"
    assert cli.main(["deck", "export", "--deck", "generation", "--format", "pdf", "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "␛]0;pwned␇" in err


ESCAPES = "\x1b[2J\x1b]0;pwned\x07\rgpt2\n✓ fake"


def test_prefetch_shows_escape_sequences_in_ids_and_messages_instead_of_sending_them(monkeypatch, capsys):
    import explorer.models.loading
    from explorer.errors import ModelLoadError

    def load_model(name, **kwargs):
        kwargs["progress"](f"Asking the Hub about “{name}” {ESCAPES}")
        raise ModelLoadError(f"The Hub answered: {ESCAPES}")

    monkeypatch.setattr(explorer.models.loading, "load_model", load_model)
    assert cli.main(["prefetch", ESCAPES, "openai-community/gpt2"]) == 1
    out = capsys.readouterr().out
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", out)  # no control character but the lines' own ends
    assert out.count("\n") == 3  # the refused id, then the Hub's stage and answer for the other: no fake lines
    assert "␛[2J␛]0;pwned␇␍gpt2␊✓ fake" in out
