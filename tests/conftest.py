"""Unit tests run offline: the hub is switched off and any non-loopback connection fails loudly."""

import os

# Read by huggingface_hub / transformers at import time, so set before anything imports them.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tests that drive the app (AppTest in this process, the browser tests' servers) run it as a visitor gets it, on the
# CPU: the app loads its models on EXPLORER_DEVICE. Library tests run on EXPLORER_TEST_DEVICE (tests/devices.py).
os.environ["EXPLORER_DEVICE"] = "cpu"
# Several test workers share the machine's cores (tests/run.sh): one thread each for torch's CPU kernels, in the
# workers and in the servers they start (children inherit it), read when torch is imported. Two threads per
# process on a loaded machine spin in OpenMP's barriers instead of working: a 10 s module took ten minutes.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(threads, "1")

import ipaddress
import socket
from pathlib import Path

import pytest

from tests.devices import DEVICE

_real_connect = socket.socket.connect


def _is_local(address) -> bool:
    if not isinstance(address, tuple):  # unix sockets
        return True
    host = address[0]
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self, address):
    if not _is_local(address):
        raise OSError(f"tests are offline: blocked a connection to {address!r}")
    return _real_connect(self, address)


socket.socket.connect = _guarded_connect


def pytest_report_header(config):
    return f"explorer test device: {DEVICE} (EXPLORER_TEST_DEVICE)"


# The modules that take longest, longest first (per-module sums of `pytest --durations=0`, 2026-11-28). A
# worker takes whole modules in collection order (`--dist loadfile`, tests/run.sh): started first, the long ones run
# side by side and the short ones fill the gaps at the end, instead of one long module starting last and running
# alone. Every other module keeps its place after these; a stale order costs minutes, never a test.
LONGEST_FIRST = (
    "test_browser_projector", "test_browser_class", "test_browser_lecture", "test_browser_drawn",
    "test_browser_links", "test_browser_server", "test_browser_attention", "test_package", "test_browser_slides",
    "test_export_labels", "test_families", "test_browser_decoding", "test_browser_class_redis", "test_bench_scripts",
    "test_deck_export", "test_app_lecture", "test_browser_drawn_values", "test_app_class", "test_app_decoding",
    "test_bench_class", "test_docker", "test_browser_inside", "test_notebook", "test_docs", "test_classroom_store",
    "test_app", "test_prose_llama", "test_browser_exports", "test_class_poll", "test_app_words",
    "test_browser_html_exports", "test_decode_together", "test_app_attention", "test_app_inside", "test_renderer",
    "test_browser", "test_export_sizes", "test_bench_lecture", "test_app_class_faults", "test_prefix",
    "test_gateway", "test_protocol",
)  # fmt: skip


def pytest_collection_modifyitems(config, items):
    """Modules in ``LONGEST_FIRST``'s order ahead of the rest; within a module, the tests keep their order."""
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}

    def module_rank(item) -> int:
        return rank.get(Path(item.nodeid.partition("::")[0]).stem, len(rank))

    items.sort(key=module_rank)


def pytest_configure(config):
    if DEVICE != "cpu":  # fail at once, not in every test, when the device asked for is not there
        import torch

        try:
            torch.empty(1, device=DEVICE)
        except Exception as error:
            raise pytest.UsageError(f"EXPLORER_TEST_DEVICE={DEVICE!r} cannot be used here: {error}") from error


@pytest.fixture(scope="session")
def _minilm_loads():
    """One load of the MiniLM per device, for the whole session."""
    import explorer

    loads = {}

    def load(device: str):
        if device not in loads:
            loads[device] = explorer.load_model(explorer.DEFAULT_ENCODER, device=device)
        return loads[device]

    return load


@pytest.fixture
def minilm(request, _minilm_loads):
    """The real pretrained all-MiniLM-L6-v2 from its PyPI package, loaded through the public API: on the test
    device, or on the CPU for tests that drive the app (they compare the app's figures with it)."""
    drives_the_app = request.module.__name__.rpartition(".")[2].startswith(("test_app", "test_browser"))
    return _minilm_loads("cpu" if drives_the_app else DEVICE)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Every tiny architecture of ``tests/tiny_models.py`` saved once as a folder: {name: path}."""
    from tests.tiny_models import TINY, save_tiny

    root = tmp_path_factory.mktemp("tiny-models")
    return {name: str(save_tiny(name, root / name)) for name in TINY}


@pytest.fixture(scope="session")
def app_url(tmp_path_factory):
    """`streamlit run app.py`, offline, shared by every browser test of this worker: starting the app (torch,
    transformers, the bundled models) costs more than most tests. A test that needs a server of its own (other
    settings, a restart, a cold cache) starts one with `served_app`."""
    from tests.browser import served_app

    with served_app(tmp_path_factory.mktemp("streamlit") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, for one browser test module. Not for the session: a running Playwright holds the main
    thread's asyncio loop, and later modules run `asyncio.run()` (the class benchmark's clients) or a Playwright of
    their own. Launching it costs about a second; the server is what is worth sharing."""
    from tests.browser import chromium

    with chromium() as instance:
        yield instance


@pytest.fixture(scope="session")
def redis_url():
    """A real redis-server for the whole session (tests/redis_server.py): its URL."""
    from tests.redis_server import redis_server

    with redis_server() as url:
        yield url


@pytest.fixture
def redis_db(redis_url):
    """The session's Redis, emptied for this test: its URL."""
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.close()
    return redis_url
