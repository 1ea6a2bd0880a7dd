"""Issue 10's crash proof: `kill -9` of a real mitmdump while 100 translated and retargeted
streams are in flight. Every turn a client completed before the kill has its row, recorded
complete; no turn whose client got a torn read is recorded as a clean 200; and after a
restart on the same ledger every turn left open is `interrupted`, which `stats` says."""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import threading
import time

import anthropic
import pytest

from tokunseba.proxy.recorder import START_AFTER_S

from .conftest import BIN, start_test_proxy
from .test_proxy_e2e import CLIENT_KEY, chat_text_stream
from tests.support.upstream import Reply

pytestmark = pytest.mark.e2e

COMPLETED_FIRST = 6  # streams that end before the kill (per kind)
KILLED = 50  # streams in flight at the kill (per kind): 100 in all
PIECES = 40  # the streams that complete: about PIECES * DELAY seconds
KILLED_PIECES = 300  # the streams the kill cuts: long enough that every one is still in flight at the kill
DELAY = 0.05  # seconds between upstream events

ANT_HEAD = [
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_crash","type":"message","role":'
    b'"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,'
    b'"output_tokens":1}}}\n\n',
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text",'
    b'"text":""}}\n\n',
]
ANT_TAIL = [
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
    b'"usage":{"output_tokens":40}}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]


def ant_text_stream(n: int) -> list[bytes]:
    deltas = [b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":'
              b'"text_delta","text":"w%d "}}\n\n' % i for i in range(n)]
    return ANT_HEAD + deltas + ANT_TAIL


class StreamClient(threading.Thread):
    """One streamed turn through the proxy with the anthropic SDK; notes its request id,
    when the first text arrived, and whether it read the stream to its clean end."""

    def __init__(self, proxy_url: str, ca: str, model: str) -> None:
        super().__init__(daemon=True)
        self.proxy_url, self.ca, self.model = proxy_url, ca, model
        self.request_id: str | None = None
        self.first = threading.Event()
        self.completed = False
        self.failure: str | None = None

    def run(self) -> None:
        http_client = anthropic.DefaultHttpxClient(proxy=self.proxy_url, timeout=60,
                                                  verify=ssl.create_default_context(cafile=self.ca))
        client = anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0, http_client=http_client)
        try:
            with client.messages.stream(model=self.model, max_tokens=50,
                                        messages=[{"role": "user", "content": "hi"}]) as s:
                self.request_id = s.response.headers.get("x-tokunseba-request-id")
                for _ in s.text_stream:
                    self.first.set()
                final = s.get_final_message()
            self.completed = final.stop_reason is not None
        except Exception as e:  # the kill: a torn read, in whatever class the SDK raises
            self.failure = f"{type(e).__name__}: {e}"
        finally:
            self.first.set()
            http_client.close()


def run_streams(proxy, models: list[str]) -> list[StreamClient]:
    clients = [StreamClient(proxy.url, str(proxy.ca), m) for m in models]
    for c in clients:
        c.start()
    return clients


def ledger_turns(path) -> dict[str, dict]:
    out = subprocess.run([str(BIN / "tokunseba"), "log", "--json", "--limit", "1000", "--ledger", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return {t["request_id"]: t for t in json.loads(out.stdout)}


def stats(path) -> dict:
    out = subprocess.run([str(BIN / "tokunseba"), "stats", "--json", "--ledger", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_kill_9_during_concurrent_streams(upstreams, tmp_path):
    oai, ant = upstreams["oai"], upstreams["ant"]

    def script(pieces: int) -> None:
        oai.script(Reply.sse(chat_text_stream("chatcmpl-crash", tuple(f"w{i} " for i in range(pieces))), delay=DELAY))
        ant.script(Reply.sse(ant_text_stream(pieces), delay=DELAY))

    script(PIECES)
    proxy = start_test_proxy(upstreams, tmp_path)
    try:
        # 1. streams the clients read to their end, before anything goes wrong
        done_first = run_streams(proxy, ["claude-crash-done", "retarget-crash-done"] * COMPLETED_FIRST)
        for c in done_first:
            c.join(60)
        assert all(c.completed for c in done_first), [c.failure for c in done_first]
        # 2. streams in flight: every one has its first text, then mitmdump is killed
        script(KILLED_PIECES)
        killed = run_streams(proxy, ["claude-crash-cut", "retarget-crash-cut"] * KILLED)
        for c in killed:
            assert c.first.wait(60)
        # a turn's start goes to the ledger START_AFTER_S after its request (with its end, when that
        # comes sooner: proxy/recorder.py); a kill inside that window leaves no row for the turn
        time.sleep(START_AFTER_S * 4)
        proxy.proc.send_signal(signal.SIGKILL)
        proxy.proc.wait(30)
        for c in killed:
            c.join(60)
    finally:
        proxy.stop()
    torn = [c for c in killed if not c.completed]
    assert len(torn) == len(killed), "a stream ended before the kill: it was not in flight"
    assert all(c.failure for c in torn)

    rows = ledger_turns(proxy.ledger)
    assert len(rows) == len(done_first) + len(killed)  # one row per turn, none lost, none doubled
    for c in done_first:  # every turn a client completed has its row, recorded complete
        r = rows[c.request_id]
        assert (r["status"], r["outcome"]) == (200, "translated" if "claude" in r["requested_model"] else "retargeted")
    ids_torn = [c.request_id for c in torn if c.request_id]
    assert len(ids_torn) == len(torn)  # each got its reply headers, so its request id
    for rid in ids_torn:  # a torn read is never recorded as a served turn
        assert rid in rows and rows[rid]["outcome"] is None and rows[rid]["status"] is None
    assert stats(proxy.ledger)["unfinished"] >= len(ids_torn)

    # 3. restart on the same ledger: what the killed proxy left open is interrupted
    again = start_test_proxy(upstreams, tmp_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            rows = ledger_turns(again.ledger)
            if all(rows[rid]["outcome"] is not None for rid in ids_torn):
                break
            assert time.monotonic() < deadline, "open turns were not marked interrupted after the restart"
            time.sleep(0.2)
        assert {rows[rid]["outcome"] for rid in ids_torn} == {"interrupted"}
        for c in done_first:
            assert rows[c.request_id]["status"] == 200  # untouched by the recovery
        st = stats(again.ledger)
        assert st["interrupted"] == len(ids_torn) and st["unfinished"] == 0
        out = subprocess.run([str(BIN / "tokunseba"), "stats", "--ledger", str(again.ledger)],
                             capture_output=True, text=True, timeout=60)
        assert f"interrupted {len(ids_torn)}" in out.stdout
        # 4. the restarted proxy serves the next turn
        oai.script(Reply.sse(chat_text_stream("chatcmpl-after")))
        (after,) = run_streams(again, ["claude-after-crash"])
        after.join(60)
        assert after.completed, after.failure
    finally:
        again.stop()
