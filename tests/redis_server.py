"""A real Redis for the tests: Debian's redis-server as a child process on a free port, nothing saved to disk.

fakeredis is no stand-in: its instances share nothing and other processes see nothing, which is exactly what the
Redis store is for. The server dies with pytest (PR_SET_PDEATHSIG), so a killed run leaves no orphan behind.

``redis_process`` is the same server with its faults at hand: started from a configuration file (the one
deploy/redis.conf ships) in a folder of its own, killed and started again on the same port (``restart``), or
paused and resumed (SIGSTOP, SIGCONT).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.browser import free_port

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@contextlib.contextmanager
def redis_server(timeout: float = 10):
    """Yields the URL of a fresh redis-server, stopped at the end; fails (never skips) when it is not installed."""
    with redis_process(timeout=timeout) as server:
        yield server.url


class RedisProcess:
    """One redis-server on a port of its own, which outlives its restarts: ``url``, ``kill``, ``restart``,
    ``pause``, ``resume``. Started with ``config`` (a file) when given, else with nothing saved to disk; the
    command line's ``options`` win over the file (as ``--appendonly no`` over its ``appendonly yes``)."""

    def __init__(self, folder: Path, config: Path | None = None, options: tuple[str, ...] = (), timeout: float = 10):
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed: `apt-get install redis-server` (tests/run.sh does it)")
        self.port, self.timeout = free_port(), timeout
        self.url = f"redis://127.0.0.1:{self.port}/0"
        where = ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(folder)]
        saved = [] if config else ["--save", "", "--appendonly", "no"]
        self.command = [binary, *([str(config)] if config else []), *where, *saved, *options]
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
        _wait_for_ping(self.url, self.process, self.timeout)

    def kill(self) -> None:
        """SIGKILL, as a crash or an out-of-memory killer would: Redis writes nothing more."""
        self.process.kill()
        self.process.wait()

    def restart(self) -> None:
        self.kill()
        self.start()

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process.poll() is not None:  # killed already
            return
        self.resume()  # a stopped process does not act on SIGTERM
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()


@contextlib.contextmanager
def redis_process(config: Path | None = None, options: tuple[str, ...] = (), timeout: float = 10):
    """A ``RedisProcess`` in a folder of its own (its append-only file), stopped and removed at the end."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="redis-") as folder:
        server = RedisProcess(Path(folder), config, options, timeout)
        try:
            yield server
        finally:
            server.stop()


def _wait_for_ping(url: str, server: subprocess.Popen, timeout: float) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                pytest.fail(f"redis-server exited at start (status {server.returncode})")
            try:
                if client.ping():
                    return
            except redis.exceptions.AuthenticationError:  # it answers: with a password (--requirepass)
                return
            except redis.exceptions.ConnectionError:  # not yet listening, or loading its append-only file
                pass
            time.sleep(0.02)
        pytest.fail(f"redis-server did not answer PING at {url} within {timeout} s")
    finally:
        client.close()
