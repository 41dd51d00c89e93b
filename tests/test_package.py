"""The project as a package, as a new user meets it: `pip install .`, then `explorer serve`.

The wheel is built from this checkout and installed into a fresh virtual environment. The environment sees
the packages of the Python that runs the tests, whether that is the machine's own (as CI runs it) or a virtual
environment a contributor made and activated (a ``.pth`` file lists its site-packages: the pinned torch and the
rest are not installed again), and pip installs the wheel offline (``--no-index``), so it must find every
dependency the package declares already satisfied. Everything then runs from a folder outside the checkout, so
nothing can come from it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import site
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.browser import (
    ROOT,
    chart_title,
    chromium,
    needs_chromium,
    open_tab,
    running_server,
    wait_for_chart,
)

PRIMARY_COLOR = "rgb(42, 111, 176)"  # #2a6fb0, theme.primaryColor in .streamlit/config.toml
SLIDER_COLOURS = """
() => [...document.querySelectorAll("[data-testid='stSlider'] *")].map(e => getComputedStyle(e).backgroundColor)
"""
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
# Left out of the copy that is built: version control, caches, earlier builds' outputs, test artifacts.
NOT_SOURCE = shutil.ignore_patterns(
    ".git", "__pycache__", "*.pyc", ".*_cache", ".benchmarks", ".venv", "build", "dist", "*.egg-info", "artifacts"
)

pytestmark = pytest.mark.slow  # a whole program or export per test: the full loop only (docs/contributing.md)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`pip wheel .` on a copy of this working tree: setuptools builds in the source folder and never removes what
    an earlier build left in build/, so a build in the checkout could ship files deleted since (and litter it)."""
    source = tmp_path_factory.mktemp("source") / "explorer-checkout"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-w", str(out), "-q"],
        check=True,
        cwd=source,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    (found,) = out.glob("*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh environment with the wheel installed, dependencies resolved (offline) against this machine's."""
    home = tmp_path_factory.mktemp("venv")
    # No pip of its own: the running environment's pip (visible through the .pth file) resolves against its
    # packages. `--system-site-packages` alone would show the base interpreter's packages, which in an activated
    # virtual environment are not the ones installed (pip then finds no transformers, say).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True)
    (own,) = (home / "lib").glob("python3*/site-packages")
    # addsitedir, not bare paths: the .pth files inside those folders (setuptools', editable installs) apply too.
    lines = [f"import site; site.addsitedir({folder!r})\n" for folder in running_site_packages()]
    (own / "running-environment.pth").write_text("".join(lines))
    installed = subprocess.run(
        [str(home / "bin" / "python"), "-m", "pip", "install", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        cwd=tmp_path_factory.mktemp("elsewhere"),
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "Successfully installed attention-decoding-explorer-0.1.0" in installed.stdout
    # Every declared dependency resolved against what is installed: pip finds nothing missing or in conflict.
    checked = subprocess.run([str(home / "bin" / "python"), "-m", "pip", "check"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return home


def running_site_packages() -> list[str]:
    """Where the running Python finds its installed packages: its environment's site-packages (with the base
    interpreter's, for a venv made with them visible) and the user's where the running Python reads them."""
    folders = [*site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    return [folder for folder in dict.fromkeys(folders) if Path(folder).is_dir()]


def test_the_fresh_environment_sees_the_running_environments_packages(venv, tmp_path):
    """The packages the tests run with (an activated venv's, or the machine's) are the fresh environment's."""
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import transformers; print(transformers.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.strip()
    import transformers

    assert found == transformers.__file__


def _checkout_files(folder: str, pattern: str = "*") -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / folder).rglob(pattern)
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_the_wheel_holds_the_package_the_app_and_the_bundled_models_only(wheel):
    archive = zipfile.ZipFile(wheel)
    files = {name for name in archive.namelist() if ".dist-info/" not in name}
    app = {"explorer/app/app.py", "explorer/app/.streamlit/config.toml"}
    app |= {f"explorer/app/{page}" for page in _checkout_files("pages", "*.py")}
    # Exactly the checkout's explorer/ (every module, the bundled models with their model cards) and the app.
    assert files == _checkout_files("explorer") | app
    for model in ("prose-llama", "prose-gpt2", "dates-t5"):
        assert {f"explorer/assets/{model}/{name}" for name in ("model.safetensors", "tokenizer.json")} <= files
    assert not [name for name in files if {"tests", "bench", "training", "docs"} & set(name.split("/"))]
    entry_points = next(name for name in archive.namelist() if name.endswith("entry_points.txt"))
    assert "explorer = explorer.cli:main" in archive.read(entry_points).decode()


def test_every_pin_of_requirements_txt_is_a_dependency_within_its_range():
    """Each package requirements.txt pins (the README's commands) is a dependency in pyproject.toml (pip install .),
    its exact pin inside the range, under the same platform marker."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {canonicalize_name(requirement.name): requirement for requirement in map(Requirement, dependencies)}
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    pins = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    assert pins
    for pin in pins:
        (version,) = (spec.version for spec in pin.specifier)
        name = canonicalize_name(pin.name)
        assert name in declared, f"{pin.name} is pinned in requirements.txt but not a dependency in pyproject.toml"
        assert declared[name].specifier.contains(version), f"{pin} lies outside {declared[name]}"
        assert declared[name].marker == pin.marker, name


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


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("not an id!", "not a Hugging Face Hub id"),
        ("nobody-here/no-such-model", "Could not reach the Hugging Face Hub"),  # a valid id, unknown offline
    ],
)
def test_explorer_prefetch_says_why_a_model_cannot_be_fetched(venv, tmp_path, model, says):
    result = subprocess.run(
        [str(venv / "bin" / "explorer"), "prefetch", model],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **OFFLINE},
    )
    assert result.returncode == 1
    assert f"✗ {model}: " in result.stdout and says in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_explorer_without_a_command_prints_its_help(venv, tmp_path):
    result = subprocess.run([str(venv / "bin" / "explorer")], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0
    assert "serve" in result.stdout and "prefetch" in result.stdout


def _serve(venv: Path, folder: Path, hosted: bool, stack: contextlib.ExitStack) -> tuple[str, Path]:
    """`explorer serve` (``--hosted`` or not) started from ``folder``: its URL and its log."""
    # A folder named explorer where the server starts (a checkout, say) must not stand in for the installed one.
    (folder / "explorer").mkdir(parents=True)
    (folder / "explorer" / "__init__.py").write_text("raise ImportError('the working folder was imported')\n")
    command = [str(venv / "bin" / "explorer"), "serve", "--server.port", "0", "--server.address", "127.0.0.1"]
    command += ["--hosted"] if hosted else []
    log = folder / "server.log"
    environment = {**os.environ, **OFFLINE}
    return stack.enter_context(running_server(command, log, port=0, cwd=folder, env=environment, timeout=90)), log


@needs_chromium[0]
@needs_chromium[1]
def test_explorer_serve_opens_the_app_in_a_browser(venv, tmp_path):
    """Both modes, local and ``--hosted``, each a server of its own: started together, they start in the time of
    one (a start mostly waits on imports), and one browser opens both."""
    with contextlib.ExitStack() as stack:
        servers = {
            hosted: _serve(venv, tmp_path / ("hosted" if hosted else "local"), hosted, stack)
            for hosted in (False, True)
        }
        browser = stack.enter_context(chromium())
        for hosted, (url, _) in servers.items():
            tab = open_tab(browser)
            tab.page.goto(f"{url}/?head=1", wait_until="domcontentloaded")
            wait_for_chart(tab.page)
            assert chart_title(tab.page) == "Attention weights · layer 0 · head 1"
            assert tab.page.locator("[data-testid='stSidebar']").count() == 1  # the app's shell, not a bare page
            # The app's own settings (.streamlit/config.toml installed beside app.py): its theme's primary colour
            # fills the sliders' tracks (Streamlit's default is red).
            assert PRIMARY_COLOR in tab.page.evaluate(SLIDER_COLOURS)
            assert tab.page.locator("[data-testid='stException']").count() == 0
            if hosted:  # hosted mode is on: a folder is refused as a class server refuses it
                tab.page.goto(f"{url}/?model=/tmp", wait_until="domcontentloaded")
                tab.page.get_by_text("models are loaded from the Hub by id").first.wait_for(timeout=60_000)
            assert tab.external == [] and tab.errors == [], hosted
            tab.context.close()
    for _, log in servers.values():
        assert "Traceback" not in log.read_text()
