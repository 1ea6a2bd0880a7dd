"""protocols/openai_responses_ws.py: the Responses WebSocket wire format. What a client message
is, the server's events read from its messages whatever their fragments (a delta typed from its
first bytes), an error event's status and message, and SSE carried back as one message per event
whatever its split."""

from __future__ import annotations


from tokunseba.protocols.openai_responses_ws import (OTHER, TURN, WARMUP, ServerEvents, SseMessages, delta_type,
                                                     read_client_message, server_event)
from tests.support.ws_upstream import frame_events


def test_client_messages():
    assert read_client_message(b'{"type":"response.create","generate":false,"input":[]}').kind == WARMUP
    turn = read_client_message(b'{"type":"response.create","model":"gpt-5.5","input":[]}')
    assert turn.kind == TURN and turn.doc["model"] == "gpt-5.5"
    assert read_client_message(b'{"type":"response.create","generate":true}').kind == TURN
    assert read_client_message(b'{"type":"session.update"}').kind == OTHER
    assert read_client_message(b"not json").kind == OTHER
    assert read_client_message(b"[1]").kind == OTHER


def test_server_events_never_depend_on_the_fragments_of_a_message():
    for payload in frame_events():
        whole = ServerEvents().feed(payload)
        assert len(whole) == 1 and whole[0].payload == payload
        for i in range(len(payload) + 1):  # every split in two
            d = ServerEvents()
            assert d.feed(payload[:i], end=False) == [] and d.pending == (i > 0)
            assert d.feed(payload[i:]) == whole
        for size in (1, 2, 5):  # and into many fragments
            d = ServerEvents()
            parts = [payload[k:k + size] for k in range(0, len(payload), size)]
            got = [ev for p in parts[:-1] for ev in d.feed(p, end=False)] + d.feed(parts[-1])
            assert got == whole


def test_sse_comes_back_as_one_message_per_event_whatever_its_split():
    sse = b"".join(b"event: x\ndata: " + p + b"\n\n" for p in frame_events()) + b": keep-alive\n\n"
    whole = SseMessages()
    want = whole.feed(sse) + whole.close()
    assert want == frame_events()
    for i in range(len(sse) + 1):
        m = SseMessages()
        assert m.feed(sse[:i]) + m.feed(sse[i:]) + m.close() == want
    m = SseMessages()
    assert [x for k in range(len(sse)) for x in m.feed(sse[k:k + 1])] + m.close() == want


def test_an_error_event_says_its_status_and_message():
    ev = server_event(b'{"type":"error","status":429,"error":{"type":"rate_limit_error","message":"slow down"}}')
    assert ev.terminal and ev.failure() == (429, "slow down")
    assert server_event(b'{"type":"error","error":{}}').failure() == (500, "upstream error event")
    assert server_event(b'{"type":"response.completed","response":{"id":"r"}}').failure() is None


def test_a_delta_is_typed_from_its_first_bytes_and_the_rest_parsed():
    for raw in (b'{"type":"response.output_text.delta","delta":"x"}', b'{"type": "response.output_text.delta"}'):
        ev = server_event(raw)
        assert ev.type == "response.output_text.delta" and ev.doc is None and not ev.terminal
    ev = server_event(b'{"type": "response.created", "response": {"id": "resp_2"}}')
    assert ev.doc is not None and ev.response_id == "resp_2"
    assert server_event(b'{"delta":"x","type":"response.output_text.delta"}').doc is not None  # other order: parsed


def test_a_delta_is_known_from_its_first_bytes():
    assert delta_type(b'{"type":"response.output_text.delta","delta":"a"}') == b"response.output_text.delta"
    assert delta_type(b'{"type": "response.function_call_arguments.delta"}') == b"response.function_call_arguments.delta"
    assert delta_type(b'{"type":"response.completed"}') is None and delta_type(b"[]") is None
    assert delta_type(b'{"delta":"a","type":"response.output_text.delta"}') is None  # other order: the full path
