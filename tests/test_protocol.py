"""A visitor's clear-cache request, sent as Streamlit's own websocket message, empties nothing the class shares.

Any client can send ``BackMsg.clear_cache``; Streamlit then clears every ``st.cache_*`` for all sessions. The
shared models and results live outside them, so after the request the page draws again without loading the
model again: transformers logs "Loading weights" once per load, and the server's log is read for it.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from tests.browser import served_app

pytestmark = pytest.mark.slow  # a server of its own: the full loop only (docs/contributing.md)

WAIT = 120


async def _run_page(ws) -> None:
    message = BackMsg()
    message.rerun_script.query_string = ""
    await ws.send(message.SerializeToString())
    charted, deadline = False, time.monotonic() + WAIT
    while time.monotonic() < deadline:
        forward = ForwardMsg()
        forward.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=WAIT))
        kind = forward.WhichOneof("type")
        if kind == "delta" and forward.delta.WhichOneof("type") == "new_element":
            charted |= forward.delta.new_element.WhichOneof("type") == "plotly_chart"
        elif kind == "script_finished" and charted:
            return
    raise TimeoutError("the page drew no chart")


async def _session(port: int, *, clear: bool) -> None:
    url = f"ws://127.0.0.1:{port}/_stcore/stream"
    async with websockets.connect(url, subprotocols=["streamlit"], max_size=None, open_timeout=60) as ws:
        await _run_page(ws)
        if clear:
            message = BackMsg()
            message.clear_cache = True
            await ws.send(message.SerializeToString())
            await asyncio.sleep(1)
            await _run_page(ws)


def test_clear_cache_message_leaves_models_loaded(tmp_path):
    log = tmp_path / "server.log"
    with served_app(log, extra_env={"EXPLORER_HOSTED": "1"}) as url:
        port = int(url.rsplit(":", 1)[1])
        asyncio.run(_session(port, clear=False))
        loaded = log.read_text().count("Loading weights")
        asyncio.run(_session(port, clear=True))  # a student sends the request, then runs the page again
        asyncio.run(_session(port, clear=False))  # another student after the request
        after = log.read_text().count("Loading weights")
    assert loaded > 0  # the log does show a load
    assert after == loaded, "the model was loaded again after the clear-cache request"
