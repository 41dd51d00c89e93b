"""The documentation: the site builds with warnings as errors and loads nothing from another host, every code sample
of the README and of docs/*.md runs (or, for shell commands, parses), the README stays short, and every relative
link leads to a file that exists.

Python samples run page by page, each page's in order in a namespace of its own (later samples use what earlier
ones made), offline (tests/conftest.py imported first: the Hub off, remote connections refused), from the
repository's root, all in one interpreter so that torch and the bundled models load once. That run and the site's
build start in the background with the module's first test, and the other tests run meanwhile.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse

import pytest

import explorer
from explorer import cli
from tests.browser import ROOT, needs_chromium, open_tab

pytestmark = pytest.mark.slow  # builds the whole site and runs every sample: the full loop only (docs/contributing.md)

README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_README_LINES = 300

FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
INLINE_CODE = re.compile(r"(`+).+?\1", re.S)
LINK = re.compile(r"!?\[[^\]\n]*\]\((?P<target><[^>]+>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")
SHELLS = {"bash", "console", "sh", "shell"}

# Commands the docs may show besides `explorer ...` (parsed by the package's own parser below) and
# `python bench/bench_class.py ...` (parsed by the benchmark's own), each one the suite runs itself. A new command
# in a sample needs a check here first: a test that runs it, or its own parser.
KNOWN_COMMANDS = {
    # Command 1 of the two: tests/test_package.py installs the requirements' packages into a fresh environment, and
    # every browser test starts `streamlit run app.py` (tests/browser.py served_app).
    "python3 -m pip install -r requirements.txt": "tests/test_package.py",
    "python3 -m streamlit run app.py": "tests/browser.py served_app",
    # tests/test_package.py builds the wheel and installs it.
    "python3 -m pip install .": "tests/test_package.py",
    # This file builds the site from mkdocs.yml; `mkdocs serve` serves the same build.
    "mkdocs build --strict": "tests/test_docs.py",
    "mkdocs serve": "tests/test_docs.py",
}
RUN_SH = "bash tests/run.sh"  # command 2 (.ci/run runs it); what follows it goes to pytest


def fenced_blocks(path: Path) -> list[tuple[str, int, str]]:
    """(language, first line of the code in the file, code) for every fenced block of ``path``, in order."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        first_line = text.count("\n", 0, match.start("body")) + 1
        blocks.append((match["lang"].lower(), first_line, textwrap.dedent(match["body"])))
    return blocks


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


# The samples' interpreter: each page's samples in order in a namespace of the page's own, each sample compiled at
# its own line of the Markdown file (a traceback names the page and the line); one interpreter for every page, so
# torch and the bundled models load once. What each page came to ({page: None, or why it failed}) goes to a file.
RUNNER = """\
import json, sys, traceback
import tests.conftest  # the Hub off, remote connections refused, EXPLORER_DEVICE=cpu
pages, results = json.load(open(sys.argv[1])), {}
for page, samples in pages:
    namespace, results[page] = {"__name__": "__main__"}, None
    for line, code in samples:
        try:
            exec(compile("\\n" * (line - 1) + code, page, "exec"), namespace)
        except BaseException:
            results[page] = f"the sample at {page}:{line} failed:\\n{traceback.format_exc()}"
            break
json.dump(results, open(sys.argv[2], "w"))
"""

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "EXPLORER_DEVICE": "cpu"}
PYTHON_PAGES = [path for path in DOCUMENTS if any(lang == "python" for lang, _, _ in fenced_blocks(path))]


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """The site's build and the samples' run, started together in the background, stopped at the end."""
    folder = tmp_path_factory.mktemp("docs")
    pages = [
        (relative(path), [(line, code) for lang, line, code in fenced_blocks(path) if lang == "python"])
        for path in PYTHON_PAGES
    ]
    (folder / "samples.json").write_text(json.dumps(pages))
    commands = {
        "site": [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", folder / "site"],
        "samples": [sys.executable, "-c", RUNNER, folder / "samples.json", folder / "results.json"],
    }
    environment = {**os.environ, **OFFLINE}
    processes = {
        name: subprocess.Popen(
            command, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for name, command in commands.items()
    }
    yield folder, processes
    for process in processes.values():
        if process.poll() is None:
            process.kill()
        process.communicate()


def _finish(started, name: str, timeout: float = 300) -> str:
    """The output of the background process ``name``, once it has ended (its exit status is its returncode)."""
    _, processes = started
    process = processes[name]
    if not hasattr(process, "output"):
        process.output = process.communicate(timeout=timeout)[0]
    return process.output


@pytest.fixture(scope="module")
def site(started) -> Path:
    output = _finish(started, "site")
    assert started[1]["site"].returncode == 0, f"mkdocs build --strict failed:\n{output}"
    return started[0] / "site"


@pytest.fixture(scope="module")
def sample_results(started) -> dict:
    output = _finish(started, "samples")
    results = started[0] / "results.json"
    assert started[1]["samples"].returncode == 0 and results.exists(), f"the samples' run failed:\n{output[-6000:]}"
    return json.loads(results.read_text())


def test_the_site_builds_with_warnings_as_errors(site):
    pages = {path.name for path in site.glob("*.html")}
    assert {"index.html", "students.html", "teachers.html", "hosting.html", "api.html", "reference.html"} <= pages
    assert {"capture.html", "benchmarks.html", "contributing.html"} <= pages
    assert (site / "search" / "search_index.json").exists()
    assert not list(site.rglob("*.py")), "the build's griffe extension is not a page of the site"


# What a page loads by itself: a resource these attributes name (links to other sites are fine, loads are not).
LOADED = dict.fromkeys(("script", "img", "iframe", "source", "audio", "video", "embed"), "src") | {"object": "data"}
NOT_LOADED_LINKS = {"canonical", "alternate", "prev", "next", "author", "license", "help", "search"}
CSS_URL = re.compile(
    r"""@import \s+ (?:url\()? \s* ['"]? (?P<imported>[^'")\s;]+)
      | url\( \s* (?: (?P<quote>['"]) (?P<quoted>.*?) (?P=quote) | (?P<bare>[^)'"]*) ) \s* \)""",
    re.VERBOSE,
)


class _Resources(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls, self.stylesheets, self.styles, self._in_style = [], [], [], False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag in LOADED and attributes.get(LOADED[tag]):
            self.urls.append(attributes[LOADED[tag]])
        if tag == "link" and attributes.get("href"):
            rels = set((attributes.get("rel") or "").lower().split())
            if not rels <= NOT_LOADED_LINKS:
                self.urls.append(attributes["href"])
                if "stylesheet" in rels:
                    self.stylesheets.append(attributes["href"])
        if attributes.get("style"):
            self.styles.append(attributes["style"])
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


def _external(url: str) -> bool:
    return url.startswith("//") or urlparse(url).scheme not in ("", "data", "blob")


def _css_urls(css: str) -> list[str]:
    """Every URL an @import or url() of ``css`` names (a data: URI included: it is not external)."""
    found = (match["imported"] or match["quoted"] or match["bare"] for match in CSS_URL.finditer(css))
    return [url.strip() for url in found if url and url.strip()]


def test_the_built_site_loads_nothing_from_another_host(site):
    """No page names a script, stylesheet, image, frame or font of another host: not in its tags, not in its inline
    styles, not in the stylesheets it loads (their @import and url(), fonts included)."""
    external = []
    for page in sorted(site.rglob("*.html")):
        resources = _Resources()
        resources.feed(page.read_text(encoding="utf-8"))
        urls = resources.urls + [url for style in resources.styles for url in _css_urls(style)]
        for href in resources.stylesheets:
            if not _external(href):
                local = urlparse(href).path  # 404.html names its assets from the site's root
                css = (site / local.lstrip("/") if local.startswith("/") else page.parent / local).read_text("utf-8")
                urls += _css_urls(css)
        external += [f"{page.relative_to(site)}: {url}" for url in urls if _external(url)]
    assert not external, "the built site loads from other hosts:\n" + "\n".join(sorted(set(external)))
    assert "fonts.googleapis" not in (site / "index.html").read_text(encoding="utf-8")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@needs_chromium[0]
@needs_chromium[1]
def test_the_site_and_its_search_work_with_no_network(site, browser):
    """Served from 127.0.0.1 to a Chromium that may only talk to it, the pages ask nothing of another host and the
    search finds the live class on the teachers' page."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        tab = open_tab(browser)
        for name in ("reference.html", "students.html", "index.html"):
            tab.page.goto(f"{url}/{name}", wait_until="networkidle")
        search = tab.page.locator("input[data-md-component='search-query']")
        search.click()
        search.press_sequentially("live class")  # keys, as a reader types: the search answers keyup
        # The results of the whole query, not of a prefix still being typed: a result's link carries the words it
        # highlights (?h=live+class).
        tab.page.wait_for_selector(".md-search-result__item a[href*='h=live+class']", timeout=60_000)
        first = tab.page.locator(".md-search-result__item a").first
        assert "teachers.html" in first.get_attribute("href")
        assert not tab.external, f"the site asked other hosts: {tab.external}"
        assert not tab.errors, tab.errors
        tab.context.close()
    finally:
        server.shutdown()
        server.server_close()


class _Started(Exception):
    """``explorer serve`` got as far as starting Streamlit (os.execve), which never returns."""


def _explorer_command(argv: list[str], monkeypatch) -> str | None:
    """None when the package's own ``explorer`` command accepts ``argv`` (nothing is served, fetched or exported);
    else why not."""
    called = []

    def execve(*args):
        raise _Started(args)

    monkeypatch.setattr(cli.os, "execve", execve)
    monkeypatch.setattr(cli, "export_deck_file", lambda *args: called.append(args) or 0)
    monkeypatch.setattr("explorer.prefetch.prefetch", lambda models: called.append(models) or [])  # none failed
    try:
        code = cli.main(argv)
    except _Started:
        return None if argv[:1] == ["serve"] else "started a server"
    except SystemExit as exit:
        return None if exit.code in (0, None) else f"the parser refused it (exit {exit.code})"
    return None if code == 0 and called else f"it did nothing (exit {code})"


def _bench_class_command(argv: list[str]) -> str | None:
    from bench import bench_class

    try:
        bench_class.arguments(argv)
    except SystemExit as exit:
        return f"bench/bench_class.py's parser refused it (exit {exit.code})"
    return None


def _shell_commands(code: str) -> list[str]:
    """Each command of a shell sample: comments and prompts ("$ ") dropped, `&&` chains split."""
    commands = []
    for line in code.splitlines():
        line = line.strip().removeprefix("$ ")
        command = []
        for word in [*shlex.split(line, comments=True), "&&"]:
            if word == "&&":
                commands += [shlex.join(command)] if command else []
                command = []
            else:
                command.append(word)
    return commands


def _check_command(command: str, monkeypatch) -> str | None:
    words = shlex.split(command)
    if words[0] == "explorer":
        return _explorer_command(words[1:], monkeypatch)
    if words[:2] in (["python", "bench/bench_class.py"], ["python3", "bench/bench_class.py"]):
        return _bench_class_command(words[2:])
    if command == RUN_SH or command.startswith(RUN_SH + " "):
        return None
    if command in KNOWN_COMMANDS:
        return None
    return "an unknown command: add a check for it to KNOWN_COMMANDS (or a parser) in tests/test_docs.py"


SHELL_PAGES = [path for path in DOCUMENTS if any(lang in SHELLS for lang, _, _ in fenced_blocks(path))]


@pytest.mark.parametrize("path", SHELL_PAGES, ids=relative)
def test_every_shell_sample_is_a_command_the_suite_checks(path, monkeypatch):
    wrong = []
    for lang, line, code in fenced_blocks(path):
        if lang in SHELLS:
            for command in _shell_commands(code):
                why = _check_command(command, monkeypatch)
                if why:
                    wrong.append(f"{relative(path)}:{line}: `{command}`: {why}")
    assert not wrong, "\n".join(wrong)


def test_the_two_commands_are_in_the_readme():
    commands = [c for lang, _, code in fenced_blocks(README) if lang in SHELLS for c in _shell_commands(code)]
    assert commands[:3] == ["python3 -m pip install -r requirements.txt", "python3 -m streamlit run app.py", RUN_SH]
    assert "python3 -m pip install ." in commands and "explorer serve" in commands


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; the details belong in docs/ (at most 300)"


def test_every_relative_link_leads_to_a_file():
    broken = []
    for path in DOCUMENTS:
        text = FENCE.sub("", path.read_text(encoding="utf-8"))
        for match in LINK.finditer(INLINE_CODE.sub("", text)):
            target = match["target"].strip("<>")
            if target.startswith("#") or urlparse(target).scheme:
                continue
            if not (path.parent / urlparse(target).path).exists():
                broken.append(f"{relative(path)}: {target}")
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)


BENCH_COMMAND = re.compile(r"`python3? (?P<script>bench/\w+\.py)(?P<arguments>[^`]*)`")


def test_every_benchmark_command_named_in_the_docs_exists():
    """The benchmarks' commands quoted in the prose (`python bench/NAME.py --option ...`): the script exists and
    takes each option named (its source declares it), so a renamed script or option cannot leave the docs behind."""
    wrong = []
    for path in DOCUMENTS:
        for match in BENCH_COMMAND.finditer(path.read_text(encoding="utf-8")):
            script = ROOT / match["script"]
            if not script.exists():
                wrong.append(f"{relative(path)}: {match[0]}: no such script")
                continue
            source = script.read_text(encoding="utf-8")
            for option in re.findall(r"--[\w-]+", match["arguments"]):
                if f'"{option}"' not in source:
                    wrong.append(f"{relative(path)}: {match[0]}: {match['script']} takes no {option}")
    assert not wrong, "\n".join(wrong)


def test_the_reference_covers_every_public_name():
    """docs/reference.md renders each name of ``explorer.__all__`` from the module that defines it."""
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    rendered = set(re.findall(r"^::: ([\w.]+)$", text, re.M))
    expected = set()
    for name in explorer.__all__:
        # The model-facing names are loaded at first use (explorer._LAZY says from where): read without importing.
        module = explorer._LAZY.get(name) or getattr(explorer, name).__module__
        expected.add(f"{module}.{name}")
    assert expected - rendered == set(), "public names missing from docs/reference.md"
    assert rendered - expected == set(), "docs/reference.md renders names that are not public"


@pytest.mark.parametrize("path", PYTHON_PAGES, ids=relative)
def test_every_python_sample_runs(sample_results, path):
    """Last in the module: the samples ran in the background while the tests above did."""
    assert sample_results[relative(path)] is None, sample_results[relative(path)]
