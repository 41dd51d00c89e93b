"""A real Redis for the tests: Debian's redis-server as a child process on a free port, nothing saved to disk.

fakeredis is no stand-in: its instances share nothing and other processes see nothing, which is exactly what the
Redis store is for. The server dies with pytest (PR_SET_PDEATHSIG), so a killed run leaves no orphan behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import signal
import subprocess
import time

import pytest

from tests.browser import free_port

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@contextlib.contextmanager
def redis_server(timeout: float = 10):
    """Yields the URL of a fresh redis-server, stopped at the end; fails (never skips) when it is not installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: `apt-get install redis-server` (tests/run.sh does it)")
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    try:
        url = f"redis://127.0.0.1:{port}/0"
        _wait_for_ping(url, server, timeout)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _wait_for_ping(url: str, server: subprocess.Popen, timeout: float) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                pytest.fail(f"redis-server exited at start (status {server.returncode})")
            with contextlib.suppress(redis.exceptions.ConnectionError):
                if client.ping():
                    return
            time.sleep(0.02)
        pytest.fail(f"redis-server did not answer PING at {url} within {timeout} s")
    finally:
        client.close()
