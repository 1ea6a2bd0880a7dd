"""The ledger says what happened, through a real mitmdump: a retargeted reply that is HTML
or cut JSON with status 200, a retargeted stream without message_stop or carrying an
upstream `event: error`, a translated whole reply cut by a reset — none is recorded as a
clean 200; and a database locked by another process delays the records, never the turns."""

from __future__ import annotations

import sqlite3
import time

import anthropic
import pytest

from .test_crash_e2e import ANT_HEAD, ANT_TAIL, ant_text_stream
from .test_proxy_e2e import ant_client, chat_reply, ledger_rows
from tests.support.upstream import Reply

pytestmark = pytest.mark.e2e


def finished_row(proxy, rid: str, timeout: float = 20.0) -> dict:
    """The turn's row once its outcome is recorded (the writer thread commits it shortly)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = ledger_rows(proxy, "SELECT * FROM turns WHERE request_id=?", rid)
        if rows and rows[0]["outcome"] is not None:
            return rows[0]
        assert time.monotonic() < deadline, f"turn {rid} was never recorded as ended: {rows}"
        time.sleep(0.05)


def stream_through(model: str) -> str:
    """A streamed turn read to the end of its bytes; its request id."""
    return stream_bytes(model)[0]


def stream_bytes(model: str) -> tuple[str, bytes]:
    with ant_client().messages.with_streaming_response.create(
            model=model, max_tokens=10, stream=True, messages=[{"role": "user", "content": "hi"}]) as resp:
        return resp.headers["x-tokunseba-request-id"], resp.read()


def failed_whole(model: str) -> anthropic.APIStatusError:
    """A whole turn the SDK must fail with its own error class (never a parse error)."""
    with pytest.raises(anthropic.APIStatusError) as ei:
        ant_client().messages.create(model=model, max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    return ei.value


def test_a_retargeted_html_or_cut_json_200_is_an_error_in_the_clients_protocol(client_env, upstreams):
    ant = upstreams["ant"]
    ant.script(Reply(200, {"content-type": "text/html"}, [b"<html><body>Bad Gateway</body></html>"]))
    err = failed_whole("retarget-html")
    assert err.status_code == 502 and err.body["error"] == {
        "type": "api_error", "message": "tokunseba: upstream reply is not valid JSON (text/html, 37 bytes)"}
    row = finished_row(client_env, err.response.headers["x-tokunseba-request-id"])
    assert row["outcome"] == "error" and row["error"] == "upstream reply is not valid JSON (text/html, 37 bytes)"
    ant.script(Reply(200, {"content-type": "application/json"}, [b'{"id":"msg_cut","type":"mess']))
    err = failed_whole("retarget-cut-json")
    assert err.status_code == 502 and "not valid JSON" in err.body["error"]["message"]
    row = finished_row(client_env, err.response.headers["x-tokunseba-request-id"])
    assert row["outcome"] == "error" and row["error"].startswith("upstream reply is not valid JSON (application/json")


def test_a_retargeted_stream_without_message_stop_or_with_an_error_event_is_not_clean(client_env, upstreams):
    ant = upstreams["ant"]
    ant.script(Reply.sse(ant_text_stream(3)[:-1]))  # everything but message_stop
    rid, body = stream_bytes("retarget-no-stop")
    assert body.startswith(b"".join(ant_text_stream(3)[:-1]))  # every event the upstream sent, as it sent it
    assert body.endswith(b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"tokunseba: '
                         b'upstream stream ended without its terminal event"}}\n\n')
    row = finished_row(client_env, rid)
    assert (row["outcome"], row["status"]) == ("error", 200)
    assert row["error"] == "upstream stream ended without its terminal event"
    ant.script(Reply.sse(ANT_HEAD + [b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
                                     b'"message":"Overloaded"}}\n\n']))
    row = finished_row(client_env, stream_through("retarget-error-event"))
    assert row["outcome"] == "error" and row["error"] == "upstream stream carried an error: Overloaded"
    ant.script(Reply.sse(ant_text_stream(3)))  # and a clean one is clean
    row = finished_row(client_env, stream_through("retarget-clean"))
    assert (row["outcome"], row["status"], row["error"]) == ("retargeted", 200, None)
    assert ANT_TAIL[-1] in b"".join(ant_text_stream(3))


def test_a_translated_whole_reply_cut_by_a_reset_is_said_as_such(client_env, upstreams):
    oai = upstreams["oai"]
    body = Reply.json(chat_reply("chatcmpl-reset")).pieces[0]
    oai.script(Reply(200, {"content-type": "application/json"}, [body[:30], body[30:]], framing="chunked",
                     die_after=1))
    with pytest.raises(anthropic.APIStatusError) as ei:
        ant_client().messages.create(model="claude-reset", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert ei.value.status_code == 502 and ei.value.body["error"]["type"] == "api_error"
    assert "upstream connection broke" in ei.value.body["error"]["message"]
    row = finished_row(client_env, ei.value.response.headers["x-tokunseba-request-id"])
    assert row["outcome"] == "error" and row["error"].startswith("upstream connection broke")


def test_a_locked_database_delays_records_never_turns(client_env, upstreams):
    """Another process holds the ledger's write lock: turns complete while it still does,
    and their rows appear once it lets go."""
    oai = upstreams["oai"]
    oai.script(Reply.json(chat_reply("chatcmpl-locked")))
    lock = sqlite3.connect(client_env.ledger, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    try:
        ids = []
        for _ in range(5):
            raw = ant_client().messages.with_raw_response.create(
                model="claude-locked", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
            assert raw.parse().id == "chatcmpl-locked"
            ids.append(raw.headers["x-tokunseba-request-id"])
        assert lock.in_transaction  # all five turns were served while the database was locked
    finally:
        lock.execute("COMMIT")
        lock.close()
    for rid in ids:
        row = finished_row(client_env, rid)
        assert (row["outcome"], row["status"]) == ("translated", 200)


def test_a_retargeted_stream_reset_mid_event_ends_with_an_error_event(client_env, upstreams):
    """The endpoint resets the connection in the middle of an event: the client gets the
    whole events before it, never the torn one, then an `event: error` its SDK raises on;
    the ledger says the connection broke; the next turn works."""
    ant = upstreams["ant"]
    events = ant_text_stream(6)
    torn = events[4][:25]
    ant.script(Reply.sse(events[:4] + [torn, events[4][25:]] + events[5:], delay=0.02, die_after=5))
    with pytest.raises(anthropic.APIStatusError) as ei:
        with ant_client().messages.stream(model="retarget-reset", max_tokens=10,
                                          messages=[{"role": "user", "content": "hi"}]) as s:
            rid = s.response.headers["x-tokunseba-request-id"]
            s.get_final_message()
    assert "upstream connection broke" in str(ei.value)
    row = finished_row(client_env, rid)
    assert row["outcome"] == "error" and row["error"].startswith("upstream connection broke")
    ant.script(Reply.sse(ant_text_stream(2)))
    with ant_client().messages.stream(model="retarget-after-reset", max_tokens=10,
                                      messages=[{"role": "user", "content": "hi"}]) as s:
        assert s.get_final_message().stop_reason == "end_turn"
