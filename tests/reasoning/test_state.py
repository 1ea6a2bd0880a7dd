"""Provider state of routed tool loops (issue 18): captured from translated replies (streamed
at every split point, and whole), restored only to its origin endpoint and model, placed
where each provider requires it, never forged; and the store that keeps it (bounded, private,
surviving a restart, degrading without a traceback)."""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import stat
import time

import pytest

from tests.support.enforcing import AnthropicThinking, DeepSeekChat
from tests.support.upstream import Recorded
from tokunseba import translate
from tokunseba.neutral.state import PROVIDER_STATE, ProviderState
from tokunseba.reasoning.state import Capture, Record, call_key, restore, text_key
from tokunseba.reasoning.store import Keeper, ReasoningStore

BASH_CHAT = [{"type": "function", "function": {"name": "Bash", "parameters": {"type": "object"}}}]
BASH_ANT = [{"name": "Bash", "input_schema": {"type": "object"}}]


def _rec(body: dict) -> Recorded:
    return Recorded("POST", "/v1/chat/completions", {}, json.dumps(body).encode(), 0.0)


def _capture_stream(upstream: str, client: str, raw: bytes, cuts: list[int], protocol_model=("ds", "m")):
    cap = Capture(upstream, *protocol_model, "tk-1")
    t = translate.stream(upstream, client)
    t.tap = cap.on
    last = 0
    for c in [*cuts, len(raw)]:
        t.feed(raw[last:c])
        last = c
    t.close()
    return cap.records()


def test_chat_reasoning_captured_the_same_at_every_split_point():
    ds = DeepSeekChat(tool_turns=1)
    raw = b"".join(ds(_rec({"stream": True, "tools": BASH_CHAT, "messages": [{"role": "user", "content": "x"}]})).pieces)
    whole = _capture_stream("openai", "anthropic", raw, [])
    assert whole == [(call_key("call_ds01"), Record("ds", "m", "openai", {"field": "reasoning_content",
                                                                         "text": ds.issued["call_ds01"]}, "tk-1"))]
    for cut in range(len(raw) + 1):
        assert _capture_stream("openai", "anthropic", raw, [cut]) == whole, cut


def test_chat_reasoning_captured_from_a_whole_reply_and_the_reasoning_spelling():
    ds = DeepSeekChat(tool_turns=1, field="reasoning")
    body = b"".join(ds(_rec({"tools": BASH_CHAT, "messages": [{"role": "user", "content": "x"}]})).pieces)
    rep = translate.reply("openai", "anthropic", body)
    cap = Capture("openai", "ds", "m", "tk-2")
    cap.message(rep.message)
    [(key, rec)] = cap.records()
    assert key == "call:call_ds01" and rec.payload == {"field": "reasoning", "text": ds.issued["call_ds01"]}


def test_anthropic_signed_thinking_captured_at_every_split_and_unsigned_never():
    ant = AnthropicThinking(tool_turns=1)
    body = {"stream": True, "tools": BASH_ANT, "max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 2000},
            "messages": [{"role": "user", "content": "x"}]}
    raw = b"".join(ant(_rec(body)).pieces)
    whole = _capture_stream("anthropic", "openai", raw, [], ("ant", "claude"))
    [(key, rec)] = whole
    t = "Step 1: which command? (ant-thought-1)"
    assert key == "call:toolu_ant01" and rec.payload == {"blocks": [{"type": "thinking", "thinking": t,
                                                                      "signature": ant.sign(t)}]}
    for cut in range(len(raw) + 1):
        assert _capture_stream("anthropic", "openai", raw, [cut], ("ant", "claude")) == whole, cut
    # an unsigned thinking block (a Chat model's) is nothing an Anthropic endpoint could take back
    no_sig = raw.replace(b'"signature_delta", "signature": "' + ant.sign(t).encode() + b'"',
                         b'"signature_delta", "signature": ""')
    assert _capture_stream("anthropic", "openai", no_sig, [], ("ant", "claude")) == []


def test_gemini_function_call_signature_captured():
    body = json.dumps({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"id": "fc_1", "name": "Bash", "args": {"command": "ls"}}, "thoughtSignature": "c2lnLTE="},
        {"functionCall": {"id": "fc_2", "name": "Bash", "args": {"command": "pwd"}}}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 3}}).encode()
    rep = translate.reply("gemini", "openai", body)
    cap = Capture("gemini", "gem", "gemini-3-pro", "tk-3")
    cap.message(rep.message)
    recs = dict(cap.records())
    assert set(recs) == {"call:fc_1", "call:fc_2"} and recs["call:fc_1"].payload == {"signatures": {"fc_1": "c2lnLTE="}}


# ---------------------------------------------------------------------------------------------
# restore


def _ant_loop_body() -> dict:
    return {"model": "claude-x", "max_tokens": 500, "tools": BASH_ANT, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "text", "text": "running"},
                                          {"type": "tool_use", "id": "call_ds01", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_ds01", "content": "ok"}]}]}


def _lookup(recs: dict):
    return lambda keys: {k: recs[k] for k in keys if k in recs}


def _ds_record(endpoint="ds", model="deepseek-reasoner"):
    return Record(endpoint, model, "openai", {"field": "reasoning_content", "text": "I thought (ds)."}, "tk-ds")


def test_restore_puts_reasoning_back_only_for_its_own_endpoint_and_model():
    recs = {"call:call_ds01": [_ds_record()]}
    body = _ant_loop_body()
    before = copy.deepcopy(body)
    reports = {}

    def restorer(ep, model):
        def run(conv):
            reports[(ep, model)] = restore(conv, _lookup(recs), ep, model, "openai")
            return reports[(ep, model)]
        return run

    same = translate.request("anthropic", "openai", body, model="deepseek-reasoner", restore=restorer("ds", "deepseek-reasoner"))
    assistant = next(m for m in same.body["messages"] if m["role"] == "assistant")
    assert assistant["reasoning_content"] == "I thought (ds)." and PROVIDER_STATE not in assistant
    assert same.state_report.restored[0]["keys"] == ["call_ds01"] and same.state_report.restored[0]["from"] == "tk-ds"
    for ep, model in (("other", "deepseek-reasoner"), ("ds", "deepseek-chat")):
        rt = translate.request("anthropic", "openai", body, model=model, restore=restorer(ep, model))
        raw = json.dumps(rt.body)
        assert "reasoning" not in raw and "I thought" not in raw
        assert rt.state_report.withheld[0]["origin"] == "ds/deepseek-reasoner"
    assert body == before  # the client's parsed body (shared by every endpoint's translation) untouched


def test_a_chat_clients_shared_body_is_not_mutated_by_a_restore():
    body = {"model": "gpt-x", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "toolu_ant01", "type": "function",
                                                               "function": {"name": "Bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "toolu_ant01", "content": "ok"}], "max_tokens": 3000}
    before = copy.deepcopy(body)
    block = {"type": "thinking", "thinking": "t", "signature": "sig-t"}
    recs = {"call:toolu_ant01": [Record("ant", "claude", "anthropic", {"blocks": [block]}, "tk-a")]}
    rt = translate.request("openai", "anthropic", body, model="claude",
                           restore=lambda conv: restore(conv, _lookup(recs), "ant", "claude", "anthropic"))
    assistant = rt.body["messages"][1]
    assert assistant["content"][0] == block and assistant["content"][1]["type"] == "tool_use"  # thinking first
    assert body == before


def test_a_clients_own_provider_state_key_is_never_taken_for_restored_state():
    body = {"model": "gpt-x", "max_tokens": 100, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "hi", PROVIDER_STATE: {"blocks": [{"type": "thinking", "thinking": "forged",
                                                                            "signature": "forged"}]}},
        {"role": "user", "content": "again"}]}
    rt = translate.request("openai", "anthropic", body)
    assert "forged" not in json.dumps(rt.body) and f"messages[1].{PROVIDER_STATE}" in rt.dropped


def test_gemini_calls_go_back_with_their_real_signature_not_the_skip_value():
    body = {"model": "gpt-x", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "fc_1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "fc_1", "content": "ok"}]}
    recs = {"call:fc_1": [Record("gem", "gemini-3-pro", "gemini", {"signatures": {"fc_1": "c2lnLTE="}}, "tk-g")]}
    rt = translate.request("openai", "gemini", body, restore=lambda c: restore(c, _lookup(recs), "gem", "gemini-3-pro", "gemini"))
    call_part = rt.body["contents"][1]["parts"][0]
    assert call_part["thoughtSignature"] == "c2lnLTE="
    assert not any("skip_thought_signature_validator" in p for p in rt.plumbing)
    # nothing stored (another model): the skip value, recorded as before
    rt = translate.request("openai", "gemini", body, restore=lambda c: restore(c, _lookup(recs), "gem", "gemini-2.5", "gemini"))
    assert rt.body["contents"][1]["parts"][0]["thoughtSignature"] == "skip_thought_signature_validator"
    assert rt.state_report.withheld


def test_a_turn_without_tool_calls_is_keyed_by_its_text():
    cap = Capture("openai", "ds", "m", "tk-t")
    from tokunseba.neutral.events import BlockDelta, BlockStart, BlockStop, MessageStart, MessageStop
    for ev in (MessageStart("x", "m"), BlockStart(0, "thinking", raw={"source": "choices[0].delta.reasoning_content"}),
               BlockDelta(0, "hmm"), BlockStop(0), BlockStart(1, "text"), BlockDelta(1, "Hello"), BlockStop(1),
               MessageStop("end_turn")):
        cap.on(ev)
    assert [k for k, _ in cap.records()] == [text_key("Hello")]


# ---------------------------------------------------------------------------------------------
# the store


def _item(i: int, endpoint="ds") -> tuple[str, Record]:
    return call_key(f"call_{i}"), Record(endpoint, "m", "openai", {"field": "reasoning_content", "text": f"r{i}"},
                                         f"tk-{i}", time.time())


def test_store_stays_within_its_bound_under_10000_turns(tmp_path):
    path = tmp_path / "reasoning.db"
    s = ReasoningStore(path, max_entries=500)
    for i in range(10_000):
        s.put([_item(i)])
        if i % 997 == 0:
            assert s.count() <= 500
    assert s.count() == 500
    assert s.get([call_key("call_9999")]) and not s.get([call_key("call_0")])  # the oldest went first
    s.close()
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM state").fetchone()[0] == 500
    con.close()


def test_store_is_private_survives_a_restart_and_forgets_after_its_retention(tmp_path):
    path = tmp_path / "data" / "reasoning.db"
    s = ReasoningStore(path)
    s.put([_item(1)])
    s.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    s = ReasoningStore(path)
    assert s.get([call_key("call_1")])[call_key("call_1")][0].payload["text"] == "r1"
    s.close()
    old = Record("ds", "m", "openai", {"field": "reasoning_content", "text": "old"}, "tk-old", time.time() - 7200)
    s = ReasoningStore(path, retention_s=3600)
    s.put([("call:old", old)])
    assert s.get(["call:old"]) == {}
    s.close()


def test_a_corrupted_store_degrades_to_memory_with_its_problem_said(tmp_path, caplog):
    path = tmp_path / "reasoning.db"
    path.write_bytes(b"garbage" * 500)
    s = ReasoningStore(path)
    assert s.problem and "reasoning.db" in s.problem
    s.put([_item(1)])
    assert s.get([call_key("call_1")])  # this process still restores what it captured
    keeper = Keeper(s)
    body = _ant_loop_body()
    conv = translate.CODECS["anthropic"].decode_request(body)
    report = keeper.restore(conv, "ds", "m", "openai")
    assert report.problem == s.problem and ("state_unavailable", {"problem": s.problem, "looked_up": 1}) in report.events()


def test_a_store_damaged_while_running_is_said_and_restores_nothing(tmp_path):
    path = tmp_path / "reasoning.db"
    s = ReasoningStore(path)
    s.put([_item(1)])
    s._db.execute("DROP TABLE state")  # damaged under the running proxy
    assert s.get([call_key("call_2")]) == {}
    assert s.problem and "cannot read" in s.problem
    assert s.get([call_key("call_1")])  # what is in memory still answers


def test_store_settings_are_checked():
    with pytest.raises(ValueError):
        ReasoningStore(None, max_entries=0)


def test_responses_reasoning_items_captured_whole_at_every_split_point_and_placed_before_their_call():
    from tests.support.enforcing import ResponsesReasoning

    rr = ResponsesReasoning(tool_turns=1)
    body = {"stream": True, "tools": [{"type": "function", "name": "Bash"}], "input": []}
    raw = b"".join(rr(Recorded("POST", "/v1/responses", {}, json.dumps(body).encode(), 0.0)).pieces)
    whole = _capture_stream("openai-responses", "anthropic", raw, [], ("resp", "gpt-5.5"))
    [(key, rec)] = whole
    item = rec.payload["items"][0]
    assert key == "call:call_rs01" and (item["id"], item["encrypted_content"]) == rr.issued["call_rs01"]
    assert item["summary"] == [{"type": "summary_text", "text": "Plan step 1"}]
    for cut in range(len(raw) + 1):
        assert _capture_stream("openai-responses", "anthropic", raw, [cut], ("resp", "gpt-5.5")) == whole, cut
    whole_reply = b"".join(rr(Recorded("POST", "/v1/responses", {}, json.dumps({**body, "stream": False}).encode(),
                                      0.0)).pieces)
    cap = Capture("openai-responses", "resp", "gpt-5.5", "tk-1")
    cap.message(translate.reply("openai-responses", "anthropic", whole_reply).message)
    assert [r.payload for _, r in cap.records()] == [rec.payload]
    conv_body = {**_ant_loop_body(), "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_rs01", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_rs01", "content": "ok"}]}]}
    rt = translate.request("anthropic", "openai-responses", conv_body, restore=lambda c: restore(
        c, _lookup({key: [rec]}), "resp", "gpt-5.5", "openai-responses"))
    assert [i["type"] for i in rt.body["input"]] == ["message", "reasoning", "function_call", "function_call_output"]
    assert rt.body["input"][1] == item


def test_gemini_signatures_captured_the_same_at_every_split_point():
    from tests.support.enforcing import GeminiSignatures

    gem = GeminiSignatures(tool_turns=1)
    body = {"tools": [{"functionDeclarations": [{"name": "Bash"}]}], "contents": [{"role": "user", "parts": [{"text": "go"}]}]}
    raw = b"".join(gem(Recorded("POST", "/v1beta/models/g:streamGenerateContent?alt=sse", {},
                                json.dumps(body).encode(), 0.0)).pieces)
    whole = _capture_stream("gemini", "openai", raw, [], ("gem", "gemini-3-pro-preview"))
    [(key, rec)] = whole
    assert rec.payload["signatures"][key.split(":", 1)[1]] in gem.issued
    for cut in range(len(raw) + 1):
        assert _capture_stream("gemini", "openai", raw, [cut], ("gem", "gemini-3-pro-preview")) == whole, cut


def test_explain_lines_for_every_state_event():
    from tokunseba.reasoning.state import STATE_EVENTS, explain_state

    lines = {
        "state_restored": {"endpoint": "ds", "model": "m", "keys": ["call_ds01"], "kind": "reasoning_content", "items": [
            {"keys": ["call_ds01"], "from": "tk-1", "message": "messages[1]", "kind": "reasoning_content"}]},
        "state_withheld": {"to": "other/o", "origin": "ds/m", "keys": ["call_ds01"], "items": [
            {"keys": ["call_ds01"], "from": "tk-1", "origin": "ds/m", "kind": "thinking", "message": "messages[1]"}]},
        "state_kept": {"keys": ["call:call_ds01", "text:abc"], "endpoint": "ds", "model": "m"},
        "state_unavailable": {"problem": "cannot read the reasoning store x: file is not a database", "looked_up": 2},
        "tool_loop": {"followed": True, "route": "r", "why": "follows its tool loop: call_ds01 made by ds/m (tk-1)"},
    }
    assert set(lines) == set(STATE_EVENTS)
    out = {k: " ".join(explain_state(k, d)[0]) for k, d in lines.items()}
    assert out["state_restored"] == "reasoning reasoning_content for call_ds01 restored from tk-1 (ds/m, messages[1])"
    assert out["state_withheld"].startswith("reasoning thinking for call_ds01 withheld: made by ds/m (tk-1)")
    assert "call_ds01, a reply without tool calls" in out["state_kept"]
    assert "file is not a database" in out["state_unavailable"]
    assert explain_state("state_unavailable", {"problem": "p", "keys": 3})  # an older record's shape: no traceback
    assert out["tool_loop"].startswith("tool loop followed its loop, not its rule:")


def test_a_store_that_cannot_be_created_goes_on_in_memory(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    s = ReasoningStore(blocker / "reasoning.db")  # its directory cannot exist
    assert s.problem and "cannot open the reasoning store" in s.problem
    s.put([_item(1)])
    assert s.get([call_key("call_1")]) and s.count() == 1
    s.close()


def test_open_keeper_settings(tmp_path, monkeypatch):
    from tokunseba.reasoning.store import open_keeper

    monkeypatch.setenv("TOKUNSEBA_HOME", str(tmp_path / "home"))
    assert open_keeper("off", "", retention_h=1, max_entries=1) is None
    assert open_keeper("memory", "", retention_h=1, max_entries=1).store.path is None
    assert open_keeper("", str(tmp_path / "x" / "ledger.db"), retention_h=1, max_entries=5).store.path == \
        tmp_path / "x" / "reasoning.db"
    assert open_keeper("", "postgresql://db/tk", retention_h=1, max_entries=5).store.path == \
        tmp_path / "home" / "reasoning.db"
    with pytest.raises(ValueError):
        open_keeper("", "", retention_h=0, max_entries=5)


def test_a_long_loop_records_one_restore_event_per_turn():
    msgs = [{"role": "user", "content": "go"}]
    recs = {}
    for i in range(19):
        cid = f"call_{i}"
        msgs += [{"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": "Bash", "input": {}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": "ok"}]}]
        recs[call_key(cid)] = [Record("ds" if i % 2 else "old", "m", "openai", {"field": "reasoning_content",
                                                                                "text": f"r{i}"}, f"tk-{i}")]
    conv = translate.CODECS["anthropic"].decode_request({"model": "x", "max_tokens": 9, "messages": msgs})
    events = restore(conv, _lookup(recs), "ds", "m", "openai").events()
    assert [k for k, _ in events] == ["state_restored", "state_withheld"]
    restored, withheld = events[0][1], events[1][1]
    assert len(restored["items"]) == 9 and len(restored["keys"]) == 9 and restored["kind"] == "reasoning_content"
    assert len(withheld["items"]) == 10 and withheld["origin"] == "old/m" and withheld["to"] == "ds/m"


def test_a_gemini_reply_without_calls_gets_its_text_signature_back_on_its_text():
    events = [{"candidates": [{"content": {"role": "model", "parts": [{"text": "Hello "}]}, "index": 0}],
               "responseId": "g1"},
              {"candidates": [{"content": {"role": "model", "parts": [{"text": "world."}]}, "index": 0}]},
              {"candidates": [{"content": {"role": "model", "parts": [{"text": "", "thoughtSignature": "dGV4dC1zaWc="}]},
                               "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 2}}]
    raw = b"".join(b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in events)
    whole = _capture_stream("gemini", "openai", raw, [], ("gem", "gemini-3-pro-preview"))
    assert whole == [(text_key("Hello world."), Record("gem", "gemini-3-pro-preview", "gemini",
                                                       {"text_signature": "dGV4dC1zaWc="}, "tk-1"))]
    for cut in range(0, len(raw) + 1, 7):
        assert _capture_stream("gemini", "openai", raw, [cut], ("gem", "gemini-3-pro-preview")) == whole, cut
    out, t = b"", translate.stream("gemini", "openai")
    out = t.feed(raw) + t.close()
    assert b"dGV4dC1zaWc=" not in out  # never to the client
    body = {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello world."},
                                           {"role": "user", "content": "more"}]}
    recs = dict(whole)
    rt = translate.request("openai", "gemini", body, restore=lambda c: restore(
        c, _lookup({k: [v] for k, v in recs.items()}), "gem", "gemini-3-pro-preview", "gemini"))
    assert rt.body["contents"][1] == {"role": "model", "parts": [{"text": "Hello world.", "thoughtSignature": "dGV4dC1zaWc="}]}
    other = translate.request("openai", "gemini", body, restore=lambda c: restore(
        c, _lookup({k: [v] for k, v in recs.items()}), "gem", "gemini-2.5-pro", "gemini"))
    assert "thoughtSignature" not in json.dumps(other.body)


def test_anthropic_redacted_thinking_is_kept_and_goes_back_first_verbatim():
    reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "stop_reason": "tool_use",
             "content": [{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
                         {"type": "thinking", "thinking": "plan", "signature": "sig-plan"},
                         {"type": "tool_use", "id": "toolu_r1", "name": "Bash", "input": {"command": "ls"}}],
             "usage": {"input_tokens": 3, "output_tokens": 4}}
    cap = Capture("anthropic", "ant", "claude", "tk-r")
    cap.message(translate.reply("anthropic", "openai", json.dumps(reply).encode()).message)
    [(key, rec)] = cap.records()
    assert rec.payload["blocks"] == reply["content"][:2]
    body = {"model": "gpt-x", "max_tokens": 5000, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "toolu_r1", "type": "function",
                                                               "function": {"name": "Bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "toolu_r1", "content": "ok"}]}
    rt = translate.request("openai", "anthropic", body, restore=lambda c: restore(
        c, _lookup({key: [rec]}), "ant", "claude", "anthropic"))
    assert rt.body["messages"][1]["content"][:2] == reply["content"][:2]
    assert rt.body["messages"][1]["content"][2]["type"] == "tool_use"
