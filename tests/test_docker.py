"""The Space: the Dockerfile, parsed by a real Dockerfile parser, agrees with the README's Space header, and the
container's exact start command, run here with the Dockerfile's environment, serves the app in hosted mode.

(The image itself cannot be built here: Docker Hub and pytorch.org are out of reach.)
"""

from __future__ import annotations

import json
import re
import shlex
import urllib.request

import pytest
import yaml

from tests.browser import ROOT, chromium, needs_chromium, open_tab, served_app, wait_for_chart

# In requirements-dev.txt; where it is missing the Dockerfile's checks are skipped with that reason, not failed.
DockerfileParser = pytest.importorskip("dockerfile_parse").DockerfileParser


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    parser = DockerfileParser(path=str(ROOT / "Dockerfile"))
    return parser


@pytest.fixture(scope="module")
def space_header() -> dict:
    text = (ROOT / "README.md").read_text()
    match = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    assert match, "README.md must open with the Space's YAML header"
    return yaml.safe_load(match[1])


def instructions(dockerfile, name: str) -> list[str]:
    return [i["value"] for i in dockerfile.structure if i["instruction"] == name]


def start_command(dockerfile) -> list[str]:
    return json.loads(instructions(dockerfile, "CMD")[-1])


def test_the_header_declares_a_docker_space(space_header):
    assert space_header["sdk"] == "docker" and space_header["app_port"] == 8501
    assert space_header["title"] and space_header["license"] == "mit"


def test_dockerfile_matches_the_header(dockerfile, space_header):
    port = space_header["app_port"]
    assert dockerfile.baseimage.startswith("python:3.11-slim")
    assert str(port) in instructions(dockerfile, "EXPOSE")[0].split()
    command = start_command(dockerfile)
    assert command[:3] == ["streamlit", "run", "app.py"] and f"--server.port={port}" in command
    assert "--server.address=0.0.0.0" in command
    healthcheck = instructions(dockerfile, "HEALTHCHECK")[0]
    assert f"127.0.0.1:{port}/_stcore/health" in healthcheck


def test_runs_as_uid_1000_with_hosted_mode_and_cpu_torch(dockerfile):
    runs = " ".join(instructions(dockerfile, "RUN"))
    assert "useradd --create-home --uid 1000 user" in runs
    assert instructions(dockerfile, "USER")[-1] == "user"
    assert dockerfile.envs["EXPLORER_HOSTED"] == "1"
    assert dockerfile.envs["STREAMLIT_CLIENT_SHOW_ERROR_DETAILS"] == "none"
    assert "download.pytorch.org/whl/cpu torch==2.13.0" in runs
    assert "python -m explorer.prefetch bert-base-uncased openai-community/gpt2" in runs
    requirements = (ROOT / "requirements.txt").read_text()
    assert "torch==2.13.0" in requirements  # the CPU wheel installed first satisfies the pin


def test_prefetch_says_clearly_when_the_hub_is_out_of_reach(capsys):
    from explorer.prefetch import main

    assert main(["openai-community/gpt2", "../../etc"]) == 1
    out = capsys.readouterr().out
    assert "✗ openai-community/gpt2" in out and "✗ ../../etc" in out


def _container_env(dockerfile) -> dict:
    """The Dockerfile's environment, for running its start command here (offline, as tests are)."""
    env = {key: value for key, value in dockerfile.envs.items() if key not in ("HOME", "HF_HOME")}
    return {**env, "HF_HUB_OFFLINE": "1"}


@needs_chromium[0]
@needs_chromium[1]
def test_the_containers_start_command_serves_the_app_in_hosted_mode(dockerfile, tmp_path):
    """The CMD as written, with the Dockerfile's environment, on loopback (tests never listen beyond it)."""
    command = start_command(dockerfile)
    assert shlex.join(command)  # a plain argv, no shell
    with served_app(
        tmp_path / "server.log",
        extra_env=_container_env(dockerfile),
        args=[a for a in command[3:] if not a.startswith(("--server.port", "--server.address"))],
    ) as url:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as response:
            assert response.status == 200
        with chromium() as browser:
            tab = open_tab(browser)
            tab.page.goto(f"{url}/?model=/root/.ssh")  # a local folder: refused in hosted mode
            sidebar = tab.page.locator("[data-testid='stSidebar']")
            refusal = sidebar.get_by_text("not a Hugging Face Hub id")
            refusal.wait_for(timeout=60_000)
            assert "all-MiniLM-L6-v2" in refusal.inner_text(), sidebar.inner_text()
            wait_for_chart(tab.page)
            assert "Traceback" not in tab.page.locator("[data-testid='stMain']").inner_text()
            assert tab.external == [] and tab.errors == []
            tab.context.close()


def test_the_class_benchmark_runs_the_server_with_the_containers_environment(dockerfile):
    from bench.bench_class import CONTAINER_ENV

    for key, value in CONTAINER_ENV.items():
        assert dockerfile.envs.get(key) == value, f"bench_class sets {key}={value}, the Dockerfile does not"
