"""The project as a package, as a new user meets it: `pip install .`, then `explorer serve`.

The wheel is built from this checkout and installed into a fresh virtual environment. The environment sees
this machine's packages (``--system-site-packages``: the pinned torch and the rest are not downloaded again),
and pip installs the wheel offline (``--no-index``), so it must find every dependency the package declares
already satisfied. Everything then runs from a folder outside the checkout, so nothing can come from it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from explorer import cli
from tests.browser import (
    ROOT,
    chart_title,
    chromium,
    free_port,
    needs_chromium,
    open_tab,
    wait_for_chart,
    wait_until_healthy,
)

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")  # setuptools' build folder, kept out of the checkout
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-w", str(out), "-q"],
        check=True,
        cwd=build,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    (found,) = out.glob("*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh environment with the wheel installed, dependencies resolved (offline) against this machine's."""
    home = tmp_path_factory.mktemp("venv")
    # No pip of its own: a fresh venv's bundled setuptools is older than torch asks for; the machine's pip and
    # setuptools (visible through the system site packages) resolve against the machine's packages instead.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(home)], check=True)
    installed = subprocess.run(
        [str(home / "bin" / "python"), "-m", "pip", "install", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        cwd=tmp_path_factory.mktemp("elsewhere"),
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return home


def test_the_wheel_holds_the_package_the_app_and_the_bundled_models_only(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    pages = {f"explorer/app/pages/{page.name}" for page in (ROOT / "pages").glob("*.py")}
    assert pages and pages <= names
    assert {"explorer/app/app.py", "explorer/app/.streamlit/config.toml", "explorer/cli.py"} <= names
    for model in ("prose-gpt2", "dates-t5"):
        assert f"explorer/assets/{model}/model.safetensors" in names
    assert not [name for name in names if name.split("/")[0] in ("tests", "bench", "training", "docs", "pages")]
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    assert "explorer = explorer.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_package_is_the_one_imported_outside_the_checkout(venv, tmp_path):
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import explorer; print(explorer.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.strip()
    assert where.startswith(str(venv)), where
    assert (venv / "bin" / "explorer").exists()


def test_explorer_prefetch_refuses_a_malformed_id_with_a_sentence(venv, tmp_path):
    result = subprocess.run(
        [str(venv / "bin" / "explorer"), "prefetch", "not an id!"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **OFFLINE},
    )
    assert result.returncode == 1
    assert "not a Hugging Face Hub id" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_explorer_without_a_command_prints_its_help(venv, tmp_path):
    result = subprocess.run([str(venv / "bin" / "explorer")], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0
    assert "serve" in result.stdout and "prefetch" in result.stdout


@needs_chromium[0]
@needs_chromium[1]
@pytest.mark.parametrize("hosted", [False, True], ids=["local", "hosted"])
def test_explorer_serve_opens_the_app_in_a_browser(venv, tmp_path, hosted):
    port = free_port()
    command = [str(venv / "bin" / "explorer"), "serve", "--server.port", str(port), "--server.address", "127.0.0.1"]
    log = tmp_path / "server.log"
    with _running(command + (["--hosted"] if hosted else []), log, cwd=tmp_path) as url, chromium() as browser:
        tab = open_tab(browser)
        tab.page.goto(f"{url}/?head=1", wait_until="domcontentloaded")
        wait_for_chart(tab.page)
        assert chart_title(tab.page) == "Attention weights · layer 0 · head 1"
        assert tab.page.locator("[data-testid='stSidebar']").count() == 1  # the app's shell, not a bare page
        if hosted:  # hosted mode is on: a folder is refused as a class server refuses it
            tab.page.goto(f"{url}/?model=/tmp", wait_until="domcontentloaded")
            tab.page.get_by_text("models are loaded from the Hub by id").first.wait_for(timeout=60_000)
        assert tab.external == [] and tab.errors == []
    assert "Traceback" not in log.read_text()


@contextlib.contextmanager
def _running(command: list[str], log: Path, *, cwd: Path):
    port = command[command.index("--server.port") + 1]
    with log.open("w") as output:
        server = subprocess.Popen(
            command, cwd=cwd, env={**os.environ, **OFFLINE}, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_healthy(url, server, log, timeout=90)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_serve_passes_the_apps_settings_then_the_callers_options():
    command = cli.serve_command(["--server.port", "9000"])
    assert command[1:4] == ["-m", "streamlit", "run"] and command[4].endswith("app.py")
    assert "--runner.postScriptGC=false" in command and "--server.fileWatcherType=none" in command
    assert command[-2:] == ["--server.port", "9000"]  # the caller's options last: they win
    assert "--client.showErrorDetails=full" in command
    hosted = cli.serve_command([], hosted=True)
    assert "--client.showErrorDetails=none" in hosted and "--client.showErrorDetails=full" not in hosted
    assert cli.serve_environment(True, {})["EXPLORER_HOSTED"] == "1"
    assert "EXPLORER_HOSTED" not in cli.serve_environment(False, {})
