"""Chat Completions and Anthropic streams translated for an OpenAI Responses client (Codex):
docs/dev/protocols.md C.3, E.5 "A stream -> C client"; docs/dev/clients.md §3.5, §4.

Every fixture under tests/data/streams goes through the Responses encoder: the output is a
canonical Responses stream (sequence numbers contiguous, every added item done, call_id never
blank, usage total = input + output or null), byte-identical under any split of the input,
and the official openai SDK's ``responses.stream().get_final_response()`` accumulates it into
the whole-reply translation of the same reply. Failing upstreams end in ``response.failed``."""

from __future__ import annotations

import json
import random

import openai
import pytest

from tests.suites.test_sdk_accumulators import WITH_REPLY, _http, _strip_nulls
from tests.translate.openai_chat.test_stream import CREATED, FAILING, FIXTURES, raw, reply_json, translate, upstream_of
from tokunseba.neutral.tools import freeform_input
from tokunseba.sse import SSEDecoder
from tokunseba.translate import reply as translate_reply
from tokunseba.translate import stream as make_stream_translator

CLIENT = "openai-responses"
# a Responses call_id takes any string: Kimi's "functions.x:0" ids, refused for Anthropic, pass
FIXTURES = [n for n in FIXTURES if upstream_of(n) != CLIENT]  # a Responses upstream is retargeted, not translated
FAILING_HERE = (FAILING - {"chat_kimi_bad_id.sse"}) & set(FIXTURES)
SDK_OK = [n for n in FIXTURES if n in WITH_REPLY]


def rtranslate(data: bytes | str, upstream: str | None = None, *, cuts: list[int] | None = None):
    return translate(data, upstream, CLIENT, cuts=cuts)


def responses_events(out: bytes) -> list[dict]:
    """The parsed data of every event; each event's `event:` line equals its data's type."""
    d = SSEDecoder()
    evs = d.feed(out) + d.close()
    parsed = [json.loads(e.data) for e in evs]
    for e, p in zip(evs, parsed):
        assert e.event == p["type"], (e.event, p)
    return parsed


def check_responses_grammar(events: list[dict]) -> dict:
    """The canonical Responses sequence (docs/dev/protocols.md C.3); returns the terminal event."""
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    rid = events[0]["response"]["id"]
    assert isinstance(rid, str) and rid
    for e in events[:2]:
        assert e["response"] == {"id": rid, "object": "response", "created_at": CREATED, "status": "in_progress",
                                 "model": events[0]["response"]["model"], "output": []}
    terminal = events[-1]
    assert terminal["type"] in ("response.completed", "response.failed")
    assert not any(e["type"] in ("response.completed", "response.failed", "response.incomplete") for e in events[:-1])
    assert terminal["response"]["id"] == rid and terminal["response"]["created_at"] == CREATED
    added: dict[int, dict] = {}
    done: dict[int, dict] = {}
    pieces: dict[int, list[str]] = {}
    for e in events[2:-1]:
        t = e["type"]
        if t == "response.output_item.added":
            assert e["output_index"] == len(added), "output_index is a running item counter"
            item = e["item"]
            assert item["status"] == "in_progress" and item["id"] not in {i["id"] for i in added.values()}
            if item["type"] == "function_call":
                assert item["call_id"] and item["arguments"] == ""
            elif item["type"] == "custom_tool_call":  # a freeform call (neutral/tools.py)
                assert item["call_id"] and item["input"] == ""
            else:
                assert item["type"] == "message" and item["role"] == "assistant" and item["content"] == []
            added[e["output_index"]] = item
            pieces[e["output_index"]] = []
            continue
        i = e["output_index"]
        assert i in added and i not in done, f"{t} for an item not open"
        if "item_id" in e:
            assert e["item_id"] == added[i]["id"]
        if t in ("response.output_text.delta", "response.function_call_arguments.delta",
                 "response.custom_tool_call_input.delta"):
            assert (added[i]["type"] == "message") == (t == "response.output_text.delta")
            assert (added[i]["type"] == "custom_tool_call") == (t == "response.custom_tool_call_input.delta")
            assert e["delta"]
            pieces[i].append(e["delta"])
        elif t == "response.custom_tool_call_input.done":
            # the decoded deltas, or (unwrap_failed) the model's raw arguments, which decode to no input
            assert e["input"] == "".join(pieces[i]) or freeform_input(e["input"]) is None
        elif t == "response.output_text.done":
            assert e["text"] == "".join(pieces[i])
        elif t == "response.content_part.done":
            assert e["part"] == {"type": "output_text", "annotations": [], "text": "".join(pieces[i])}
        elif t == "response.function_call_arguments.done":
            assert e["arguments"] == ("".join(pieces[i]) or "{}")
        elif t == "response.output_item.done":
            item = e["item"]
            assert (item["id"], item["type"], item["status"]) == (added[i]["id"], added[i]["type"], "completed")
            if item["type"] == "function_call":
                assert (item["call_id"], item["name"]) == (added[i]["call_id"], added[i]["name"])
                assert item["arguments"] == ("".join(pieces[i]) or "{}")
            elif item["type"] == "custom_tool_call":
                assert (item["call_id"], item["name"]) == (added[i]["call_id"], added[i]["name"])
                assert item["input"] == "".join(pieces[i]) or freeform_input(item["input"]) is None
            else:
                assert item["content"] == [{"type": "output_text", "annotations": [], "text": "".join(pieces[i])}]
            done[i] = item
        else:
            assert t == "response.content_part.added" and e["content_index"] == 0
    resp = terminal["response"]
    if terminal["type"] == "response.completed":
        assert set(done) == set(added), "every added item has its done"
        assert resp["output"] == [done[i] for i in sorted(done)]
        assert resp["status"] in ("completed", "incomplete")
        assert ("incomplete_details" in resp) == (resp["status"] == "incomplete")
        u = resp["usage"]
        if u is not None:
            ints = [u["input_tokens"], u["output_tokens"], u["total_tokens"]]
            assert all(type(n) is int for n in ints)
            assert u["total_tokens"] == u["input_tokens"] + u["output_tokens"]
    else:
        assert resp["status"] == "failed"
        assert isinstance(resp["error"]["code"], str) and isinstance(resp["error"]["message"], str)
    return terminal


def responses_final(body: bytes):
    seen: list[dict] = []
    client = openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1", http_client=_http(body, seen), max_retries=0)
    with client.responses.stream(model="m", input="hi") as s:
        final = s.get_final_response()
    assert seen and seen[0]["stream"] is True
    return final


def response_view(r: dict, *, raw_arguments: bool) -> dict:
    """The comparable part of a Responses ``response`` (nulls the SDK adds removed; tool
    arguments parsed, and kept raw too when the bytes must be the upstream's own)."""
    items = []
    for it in r["output"]:
        if it["type"] == "message":
            items.append({k: it[k] for k in ("id", "type", "status", "role")}
                         | {"content": [_strip_nulls(p) for p in it["content"]]})
        else:
            v = {k: it[k] for k in ("id", "type", "status", "call_id", "name")}
            v["arguments"] = json.loads(it["arguments"])
            if raw_arguments:
                v["raw"] = it["arguments"]
            items.append(v)
    usage = r.get("usage")
    return {"id": r["id"], "model": r["model"], "status": r["status"], "output": items,
            "incomplete_details": r.get("incomplete_details"), "usage": None if usage is None else _strip_nulls(usage)}


# --------------------------------------------------------------------------------------
# every fixture


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_gives_a_canonical_responses_stream(name):
    out, t = rtranslate(name)
    terminal = check_responses_grammar(responses_events(out))
    assert t.started and t.fail("late") == b""  # a terminal event was sent: nothing more goes out
    assert t.report.completed == (name not in FAILING_HERE)
    assert (terminal["type"] == "response.failed") == (name in FAILING_HERE)
    if terminal["type"] == "response.completed":
        assert t.client_usage == terminal["response"]["usage"]
    else:
        assert t.client_usage is None and t.report.errors == [terminal["response"]["error"]["message"]]


def _result(name: str, cuts: list[int] | None):
    out, t = rtranslate(name, cuts=cuts)
    return out, t.report, t.client_usage, t.started


@pytest.mark.parametrize("name", FIXTURES)
def test_output_never_depends_on_the_split(name):
    """Whole, byte by byte, cut at every single point, and 100 seeded random splittings give
    byte-identical output and identical reports (the approach of test_split_invariance)."""
    whole = _result(name, None)
    n = len(raw(name))
    assert whole[0]
    assert _result(name, list(range(1, n))) == whole
    for cut in range(n + 1):
        assert _result(name, [cut]) == whole, f"differs when cut at byte {cut}"
    rng = random.Random(f"responses:{name}")
    for _ in range(100):
        cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randint(1, 40))))
        assert _result(name, cuts) == whole, cuts


@pytest.mark.parametrize("name", SDK_OK)
def test_openai_sdk_accumulates_translated_stream_into_the_whole_reply(name):
    out, t = rtranslate(name)
    final = responses_final(out).model_dump(mode="json")
    upstream = upstream_of(name)
    rep = translate_reply(upstream, CLIENT, reply_json(name), created=CREATED)
    whole = json.loads(rep.body)
    # a Chat upstream's argument bytes travel as they are; Anthropic's are serialized from
    # `input` in a whole reply, so only their meaning is compared (E.2)
    raw_args = upstream == "openai"
    assert response_view(final, raw_arguments=raw_args) == response_view(whole, raw_arguments=raw_args)
    assert final["created_at"] == whole["created_at"] == CREATED
    assert t.report.stop_reason == rep.stop_reason
    assert t.client_usage == rep.client_usage == whole["usage"]
    assert t.report.usage == rep.usage
    assert sorted(p.replace(".delta.", ".message.") for p in t.report.dropped) == sorted(rep.dropped)  # order: arrival


@pytest.mark.parametrize("name", sorted(FAILING_HERE))
def test_failing_upstream_ends_in_response_failed_and_the_sdk_raises(name):
    out, t = rtranslate(name)
    events = responses_events(out)
    assert events[-1]["type"] == "response.failed"
    assert "response.completed" not in {e["type"] for e in events}
    with pytest.raises(RuntimeError, match="response.completed"):
        responses_final(out)
    assert not t.report.completed and t.report.stop_reason is None


# --------------------------------------------------------------------------------------
# the validated examples


def test_validated_chat_stream_event_by_event():
    out, t = rtranslate("chat_validated_parallel_tools.sse")
    ev = responses_events(out)
    rid, model, mid, fc1, fc2 = ("chatcmpl-C9xKq2mZ", "gpt-4.1-2025-04-14", "msg_chatcmpl-C9xKq2mZ_0",
                                 "fc_chatcmpl-C9xKq2mZ_1", "fc_chatcmpl-C9xKq2mZ_2")
    snap = {"id": rid, "object": "response", "created_at": CREATED, "status": "in_progress", "model": model,
            "output": []}
    text = "Checking both cities."
    part = {"type": "output_text", "annotations": [], "text": text}
    msg = {"id": mid, "type": "message", "status": "completed", "content": [part], "role": "assistant"}

    def call(iid, call_id, args, status="completed"):
        return {"id": iid, "type": "function_call", "status": status, "arguments": args, "call_id": call_id,
                "name": "get_weather"}

    paris, oslo = call(fc1, "call_pQ0bLh1E9vRZ", "{\"city\": \"Paris\"}"), call(fc2, "call_Yz7mW4kTfN2c", "{\"city\": \"Oslo\"}")
    usage = {"input_tokens": 2610, "input_tokens_details": {"cached_tokens": 2048}, "output_tokens": 58,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2668}
    expected = [
        ("response.created", {"response": snap}),
        ("response.in_progress", {"response": snap}),
        ("response.output_item.added", {"output_index": 0, "item": {"id": mid, "type": "message", "status": "in_progress",
                                                                    "content": [], "role": "assistant"}}),
        ("response.content_part.added", {"item_id": mid, "output_index": 0, "content_index": 0,
                                         "part": {"type": "output_text", "annotations": [], "text": ""}}),
        ("response.output_text.delta", {"item_id": mid, "output_index": 0, "content_index": 0, "delta": "Checking both",
                                        "logprobs": []}),
        ("response.output_text.delta", {"item_id": mid, "output_index": 0, "content_index": 0, "delta": " cities.",
                                        "logprobs": []}),
        ("response.output_text.done", {"item_id": mid, "output_index": 0, "content_index": 0, "text": text,
                                       "logprobs": []}),
        ("response.content_part.done", {"item_id": mid, "output_index": 0, "content_index": 0, "part": part}),
        ("response.output_item.done", {"output_index": 0, "item": msg}),
        ("response.output_item.added", {"output_index": 1, "item": call(fc1, "call_pQ0bLh1E9vRZ", "", "in_progress")}),
        ("response.function_call_arguments.delta", {"item_id": fc1, "output_index": 1, "delta": "{\"city\": \"Pa"}),
        ("response.function_call_arguments.delta", {"item_id": fc1, "output_index": 1, "delta": "ris\"}"}),
        ("response.output_item.added", {"output_index": 2, "item": call(fc2, "call_Yz7mW4kTfN2c", "", "in_progress")}),
        ("response.function_call_arguments.delta", {"item_id": fc2, "output_index": 2, "delta": "{\"city\": \"Oslo\"}"}),
        # a call's completion is held until no fragment of it can follow (parallel Chat calls interleave)
        ("response.function_call_arguments.done", {"item_id": fc1, "output_index": 1, "arguments": paris["arguments"]}),
        ("response.output_item.done", {"output_index": 1, "item": paris}),
        ("response.function_call_arguments.done", {"item_id": fc2, "output_index": 2, "arguments": oslo["arguments"]}),
        ("response.output_item.done", {"output_index": 2, "item": oslo}),
        ("response.completed", {"response": {**snap, "status": "completed", "output": [msg, paris, oslo],
                                             "usage": usage}}),
    ]
    assert [(e["type"], {k: v for k, v in e.items() if k not in ("type", "sequence_number")}) for e in ev] == expected
    assert t.client_usage == usage and t.report.usage.reported["prompt_tokens"] == 2610
    assert (t.report.stop_reason, t.report.completed, t.report.dropped, t.report.warnings) == ("tool_use", True, [], [])


def test_validated_anthropic_stream_items_and_usage():
    out, t = rtranslate("anthropic_validated_text_tool.sse")
    resp = responses_events(out)[-1]["response"]
    assert resp["id"] == "msg_01XFDUDYJgAACzvnptvVoYEL" and resp["model"] == "claude-sonnet-4-6"
    text, call = resp["output"]
    assert text["content"][0]["text"] == "Let me check the weather."
    assert call == {"id": "fc_msg_01XFDUDYJgAACzvnptvVoYEL_1", "type": "function_call", "status": "completed",
                    "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}",
                    "call_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather"}
    # Anthropic input_tokens excludes the cache; Responses input_tokens includes it (E.4)
    assert resp["usage"] == {"input_tokens": 472 + 2048, "input_tokens_details": {"cached_tokens": 2048,
                                                                                  "cache_write_tokens": 0},
                             "output_tokens": 71, "total_tokens": 2591}
    assert resp["status"] == "completed" and t.report.stop_reason == "tool_use"


# --------------------------------------------------------------------------------------
# content


def test_interleaved_parallel_arguments_reach_their_own_call():
    out, t = rtranslate("chat_interleaved_tools.sse")
    ev = responses_events(out)
    calls = [(i["call_id"], i["name"], i["arguments"]) for i in ev[-1]["response"]["output"]]
    assert calls == [("call_A1", "get_weather", "{\"city\": \"Paris\"}"),
                     ("call_B2", "get_time", "{\"tz\": \"Europe/Paris\"}")]
    types = [e["type"] for e in ev]
    assert types.index("response.output_item.done") > max(i for i, x in enumerate(types)
                                                           if x == "response.function_call_arguments.delta")


def test_arguments_after_finish_reason_are_kept():
    out, _ = rtranslate("chat_args_after_finish.sse")
    (call,) = responses_events(out)[-1]["response"]["output"]
    assert (call["call_id"], call["arguments"]) == ("call_L4te", "{\"command\": \"ls -la\"}")


def test_fragment_after_a_text_block_still_reaches_its_call():
    """A Chat call's block is stopped only at the finish (parallel calls and text may
    interleave with its fragments): a fragment after a text block reaches its call, which
    completes with every fragment."""
    data = (b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1",'
            b'"type":"function","function":{"name":"f","arguments":"{"}}]},"finish_reason":null}]}\n\n'
            b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
            b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":'
            b'{"arguments":"}"}}]},"finish_reason":null}]}\n\n'
            b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
            b'data: [DONE]\n\n')
    out, t = rtranslate(data, "openai")
    terminal = check_responses_grammar(responses_events(out))
    assert terminal["type"] == "response.completed" and t.report.completed
    assert [(i["type"], i.get("arguments"), i.get("content")) for i in terminal["response"]["output"]] == [
        ("function_call", "{}", None), ("message", None, [{"type": "output_text", "annotations": [], "text": "hi"}])]


def test_blocks_never_stopped_still_complete_at_the_end():
    """An upstream that skips content_block_stop still gives every item its done."""
    data = b"".join(b"event: %s\ndata: %s\n\n" % (d["type"].encode(), json.dumps(d).encode()) for d in [
        {"type": "message_start", "message": {"id": "msg_1", "model": "c", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1",
                                                                     "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"}])
    out, t = rtranslate(data, "anthropic")
    terminal = check_responses_grammar(responses_events(out))
    assert [(i["type"], i.get("call_id")) for i in terminal["response"]["output"]] == [("message", None),
                                                                                       ("function_call", "toolu_1")]
    assert terminal["response"]["usage"] == {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}


def test_call_ids_travel_byte_for_byte():
    out, _ = rtranslate("chat_kimi_bad_id.sse")
    resp = responses_events(out)[-1]["response"]
    assert [i.get("call_id") for i in resp["output"]] == [None, "functions.get_weather:0"]
    out, _ = rtranslate("llamacpp_py_tool.sse")
    (call,) = responses_events(out)[-1]["response"]["output"]
    assert call["call_id"] == "call__0_get_weather_cmpl-9f6e47d6-a94e-4d05-a0e0-ea413a804ace"
    assert json.loads(call["arguments"]) == {"location": "Paris", "unit": "celsius"}


def test_call_without_arguments_completes_with_an_empty_object():
    out, _ = rtranslate("anthropic_server_tool_use.sse")
    ev = responses_events(out)
    call = ev[-1]["response"]["output"][-1]
    assert (call["call_id"], call["arguments"]) == ("toolu_01NoArgs", "{}")
    assert not any(e["type"] == "response.function_call_arguments.delta" and e["item_id"] == call["id"] for e in ev)


def test_non_ascii_text_and_arguments_are_kept():
    out, _ = rtranslate("ollama_whole_call.sse")
    output = responses_events(out)[-1]["response"]["output"]
    assert output[0]["content"][0]["text"] == "Checking héllo 日本 🎉"
    assert json.loads(output[2]["arguments"]) == {"city": "Tōkyō 東京"}


@pytest.mark.parametrize("name,dropped,secret", [
    ("anthropic_thinking_signature.sse", ["content[].thinking"], "Weather in Paris"),
    ("chat_reasoning_content.sse", ["choices[0].delta.reasoning_content"], "The user greets"),
    ("vllm_reasoning_stop_string.sse", ["choices[0].delta.reasoning", "stop_sequence"], "Count to three"),
])
def test_thinking_and_reasoning_are_dropped_and_recorded(name, dropped, secret):
    out, t = rtranslate(name)
    ev = responses_events(out)
    assert {i["type"] for i in ev[-1]["response"]["output"]} <= {"message", "function_call"}
    assert t.report.dropped == dropped
    text = out.decode()
    assert secret not in text and "EqQBCkYIBRgCKkDsig==" not in text and "encrypted_content" not in text
    assert not any(e["type"].startswith("response.reasoning") for e in ev)


# --------------------------------------------------------------------------------------
# stop reasons and usage


def _chat_stream(finish: str, usage: bytes | None = None) -> bytes:
    tail = b'data: {"id":"c","model":"m","choices":[],"usage":' + usage + b'}\n\n' if usage else b""
    return (b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'
            b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"' + finish.encode()
            + b'"}]}\n\n' + tail + b"data: [DONE]\n\n")


@pytest.mark.parametrize("finish,status,reason", [("stop", "completed", None), ("tool_calls", "completed", None),
                                                  ("length", "incomplete", "max_output_tokens"),
                                                  ("content_filter", "incomplete", "content_filter")])
def test_finish_reason_to_status(finish, status, reason):
    out, t = rtranslate(_chat_stream(finish), "openai")
    terminal = check_responses_grammar(responses_events(out))
    assert terminal["type"] == "response.completed"  # Codex has no response.incomplete branch
    assert terminal["response"]["status"] == status
    assert terminal["response"].get("incomplete_details") == (reason and {"reason": reason})
    assert bool(t.report.warnings) == (reason is not None)


def test_max_tokens_from_a_local_server_is_incomplete_with_a_warning():
    out, t = rtranslate("llamacpp_py_text.sse")
    resp = responses_events(out)[-1]["response"]
    assert (resp["status"], resp["incomplete_details"]) == ("incomplete", {"reason": "max_output_tokens"})
    assert resp["output"][0]["content"][0]["text"] == "Say hello. mendatanguser\n"
    assert t.report.stop_reason == "max_tokens"
    assert t.report.warnings == ["stop_reason 'max_tokens' sent as response.completed with status 'incomplete' "
                                 "(Codex has no response.incomplete branch)"]


@pytest.mark.parametrize("name", ["llamacpp_py_tool.sse", "llamacpp_py_text.sse", "chat_kimi_bad_id.sse"])
def test_no_usage_reported_gives_usage_null_never_zeros(name):
    out, t = rtranslate(name)
    resp = responses_events(out)[-1]["response"]
    assert "usage" in resp and resp["usage"] is None
    assert t.client_usage is None and t.report.usage is None


def test_usage_without_output_tokens_is_null_and_kept_for_the_ledger():
    out, t = rtranslate(_chat_stream("stop", b'{"prompt_tokens":12}'), "openai")
    assert responses_events(out)[-1]["response"]["usage"] is None
    assert t.client_usage is None and t.report.usage.reported == {"prompt_tokens": 12}
    assert any("usage" in w for w in t.report.warnings)


def test_usage_without_cache_details_has_no_details_object():
    out, t = rtranslate("chat_usage_on_finish.sse")
    assert t.client_usage == {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15}


# --------------------------------------------------------------------------------------
# errors


def _error_code(data: bytes, upstream: str) -> tuple[str, str]:
    out, _ = rtranslate(data, upstream)
    err = check_responses_grammar(responses_events(out))["response"]["error"]
    return err["code"], err["message"]


def test_chat_error_chunk_becomes_response_failed():
    out, t = rtranslate("chat_error_midstream.sse")
    ev = responses_events(out)
    assert ev[-1]["response"]["error"] == {
        "code": "server_error", "message": "The server had an error while processing your request. Sorry about that!"}
    assert ev[-1]["response"]["output"] == []  # the open text item never completed


@pytest.mark.parametrize("data,upstream,code", [
    (b'data: {"error":{"message":"This model\'s maximum context length is 4096 tokens.","type":"invalid_request_error",'
     b'"param":"messages","code":"context_length_exceeded"}}\n\n', "openai", "context_length_exceeded"),
    (b'data: {"error":{"message":"the request exceeds the available context size","type":"exceed_context_size_error",'
     b'"code":400}}\n\n', "openai", "context_length_exceeded"),
    (b'data: {"error":{"message":"You exceeded your current quota","type":"insufficient_quota",'
     b'"code":"insufficient_quota"}}\n\n', "openai", "insufficient_quota"),
    (b'event: error\ndata: {"type":"error","error":{"type":"rate_limit_error","message":"Rate limited. Please try '
     b'again in 20s"}}\n\n', "anthropic", "rate_limit_exceeded"),
    (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
     "anthropic", "server_error"),
    (b'event: error\ndata: {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: '
     b'210000 tokens > 200000 maximum"}}\n\n', "anthropic", "context_length_exceeded"),
])
def test_error_codes_codex_acts_on(data, upstream, code):
    got, message = _error_code(data, upstream)
    assert got == code and message  # the upstream's message text is kept
    assert message in data.decode()


def test_empty_upstream_body_fails_with_a_minted_response_id():
    out, t = rtranslate(b"", "openai")
    ev = responses_events(out)
    assert [e["type"] for e in ev] == ["response.created", "response.in_progress", "response.failed"]
    check_responses_grammar(ev)
    assert ev[-1]["response"]["id"] == f"resp_tk_{CREATED}"
    assert ev[-1]["response"]["error"] == {"code": "server_error", "message": "upstream ended the stream early"}
    assert t.report.warnings == ["id_synthesized: response.id"]


def test_fail_continues_the_sequence_and_is_idempotent():
    t = make_stream_translator("anthropic", CLIENT, created=CREATED)
    first = t.feed(raw("anthropic_validated_text_tool.sse")[:700])
    err = t.fail("upstream connection reset")
    ev = responses_events(first + err)
    assert check_responses_grammar(ev)["response"]["error"] == {"code": "server_error",
                                                                "message": "upstream connection reset"}
    assert t.fail("again") == b"" and t.close() == b"" and t.feed(b"data: x\n\n") == b""
    assert t.report.errors == ["upstream connection reset"]


def test_fail_after_completion_sends_nothing():
    t = make_stream_translator("openai", CLIENT, created=CREATED)
    t.feed(raw("chat_validated_parallel_tools.sse"))
    assert t.report.completed and t.fail("late") == b"" and t.report.errors == []


# --------------------------------------------------------------------------------------
# the translator object


def test_output_is_not_buffered():
    """Each complete upstream chunk yields its events from the same feed call; only the
    finish chunk waits (for the usage chunk that carries the end)."""
    data = raw("chat_validated_parallel_tools.sse")
    t = make_stream_translator("openai", CLIENT, created=CREATED)
    outs = [t.feed(e + b"\n\n") for e in data.split(b"\n\n") if e]
    assert all(outs[:-3]) and outs[-3] == b""
    assert b"response.completed" in outs[-2] and outs[-1] == b""


@pytest.mark.parametrize("upstream", ["openai", "anthropic"])
def test_responses_is_a_client_protocol_for_both_upstreams(upstream):
    assert make_stream_translator(upstream, CLIENT).client_usage is None


@pytest.mark.parametrize("pair", [(CLIENT, "nope"), (CLIENT, CLIENT), ("nope", CLIENT)])
def test_pairs_without_a_codec_are_still_refused(pair):
    with pytest.raises(ValueError):
        make_stream_translator(*pair)
