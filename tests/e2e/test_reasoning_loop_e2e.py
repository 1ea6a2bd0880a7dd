"""End to end: a routed tool loop keeps its reasoning (issue 18). A real mitmdump, the
official SDKs through HTTPS_PROXY, and scripted upstreams that enforce each provider's rule
on reasoning state (tests/support/enforcing.py): DeepSeek's thinking mode answers 400 when a tool
loop's follow-up lacks the ``reasoning_content`` it wrote."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess

import anthropic
import openai
import pytest

from .conftest import BIN, Mitmdump, ledger_settled, point_clients_at
from tests.support.enforcing import (DEEPSEEK_400, SKIP_SIGNATURE, AnthropicThinking, DeepSeekChat, GeminiSignatures,
                        ResponsesReasoning)
from tests.support.upstream import Reply, Upstream

pytestmark = pytest.mark.e2e

RULES = """\
endpoints:
  ds:
    protocol: openai
    url: {ds}/v1
    max_tokens: 4096
  other:
    protocol: openai
    url: {other}/v1
  gem:
    protocol: gemini
    url: {gem}/v1beta
  resp:
    protocol: openai-responses
    url: {resp}/v1
  ant:
    protocol: anthropic
    url: {ant}/v1
    max_tokens: 16000
routes:
  - name: plan-on-ds                 # a rule on turn shape: the user's own "run ..." turns
    when: {{client: anthropic, model: "claude-mix-*", last_user_matches: "(?i)^run"}}
    to: ds
    model: deepseek-reasoner
  - name: rest-elsewhere             # ... and everything else, tool results included
    when: {{client: anthropic, model: "claude-mix-*"}}
    to: other
    model: other-model
  - name: to-resp
    when: {{client: anthropic, model: "claude-resp-*"}}
    to: resp
    model: gpt-5.5
  - name: responses-to-ds
    when: {{client: openai-responses, model: "gpt-ds-*"}}
    to: ds
    model: deepseek-reasoner
  - name: genai-to-ant
    when: {{client: gemini, model: "sdk-ant-*"}}
    to: ant
    model: claude-sonnet-4-5
  - name: to-gem
    when: {{client: openai, model: "gpt-gem-*"}}
    to: gem
    model: gemini-3-pro-preview
  - name: to-ant
    when: {{client: openai, model: "gpt-ant-*"}}
    to: ant
    model: claude-sonnet-4-5
  - name: to-ds
    when: {{client: anthropic, model: "claude-ds-*"}}
    to: ds
    model: deepseek-reasoner
  - name: to-other
    when: {{client: anthropic, model: "claude-other-*"}}
    to: other
    model: other-model
"""

BASH = [{"name": "Bash", "description": "run a shell command",
         "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]


@pytest.fixture(scope="module")
def ups():
    with Upstream() as ds, Upstream() as other, Upstream() as ant, Upstream() as gem, Upstream() as resp:
        yield {"ds": ds, "other": other, "ant": ant, "gem": gem, "resp": resp}


def start(ups, work, *extra: str, top: str = "") -> Mitmdump:
    rules = work / "rules.yaml"
    rules.write_text(top + RULES.format(ds=ups["ds"].url, other=ups["other"].url, ant=ups["ant"].url, gem=ups["gem"].url, resp=ups["resp"].url))
    return Mitmdump(work, rules, extra=list(extra))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("reasoning")


@pytest.fixture(scope="module")
def proxy(ups, work):
    m = start(ups, work)
    yield m
    m.stop()


def events(ledger, kind: str) -> list[dict]:
    con = sqlite3.connect(ledger)
    try:
        return [json.loads(d) for (d,) in con.execute("SELECT data FROM events WHERE kind = ? ORDER BY id", (kind,))]
    finally:
        con.close()


def loop(client: anthropic.Anthropic, model: str, stream: bool, messages: list | None = None, turns: int = 6):
    """Claude-Code-style tool loop: answer every tool_use with a tool_result until the model stops."""
    messages = messages or [{"role": "user", "content": "run the three steps"}]
    for _ in range(turns):
        kw = dict(model=model, max_tokens=2000, tools=BASH, messages=messages)
        if stream:
            with client.messages.stream(**kw) as s:
                final = s.get_final_message()
        else:
            final = client.messages.create(**kw)
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]})
        if final.stop_reason != "tool_use":
            return final, messages
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": f"ran {b.input['command']}"}
            for b in final.content if b.type == "tool_use"]})
    raise AssertionError("the loop did not end")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_anthropic_client_deepseek_thinking_loop_of_three_tool_turns(proxy, ups, monkeypatch, stream):
    """Fact 1: without the restore, the second tool turn gets DeepSeek's 400."""
    point_clients_at(proxy, monkeypatch)
    ds = DeepSeekChat(tool_turns=3)
    ups["ds"].script()
    ups["ds"].responder = ds
    final, messages = loop(anthropic.Anthropic(api_key="sk-ant-client", max_retries=0), "claude-ds-1", stream)
    assert ds.rejected == [] and final.content[-1].text == "All 3 steps done."
    sent = [r.json() for r in ups["ds"].requests]
    assert len(sent) == 4
    # each follow-up carries, on each assistant message with tool_calls, exactly what DeepSeek wrote for it
    last = sent[-1]["messages"]
    got = {m["tool_calls"][0]["id"]: m["reasoning_content"] for m in last if m.get("tool_calls")}
    assert got == {cid: ds.issued[cid] for cid in ("call_ds01", "call_ds02", "call_ds03")}
    # the client never saw the reasoning (unsigned thinking has no place in an Anthropic reply)
    assert not any(b.get("type") == "thinking" for m in messages if m["role"] == "assistant" for b in m["content"])
    ledger_settled(proxy.ledger)
    restored = events(proxy.ledger, "state_restored")
    assert {k for e in restored for k in e["keys"]} >= {"call_ds01", "call_ds02", "call_ds03"}
    assert all(e["endpoint"] == "ds" and e["model"] == "deepseek-reasoner" and e["kind"] == "reasoning_content"
               for e in restored)
    kept = events(proxy.ledger, "state_kept")
    assert any("call:call_ds01" in e["keys"] for e in kept)
    # explain tells the story of the last turn
    con = sqlite3.connect(proxy.ledger)
    rid = con.execute("SELECT request_id FROM events WHERE kind = 'state_restored' ORDER BY id DESC LIMIT 1").fetchone()[0]
    con.close()
    out = subprocess.run([str(BIN / "tokunseba"), "explain", rid, "--ledger", str(proxy.ledger)],
                         capture_output=True, text=True, check=True).stdout
    assert "reasoning_content for call_ds01 restored from tk-" in out and "(ds/deepseek-reasoner" in out


def test_without_a_store_the_second_tool_turn_gets_deepseeks_400(ups, tmp_path, monkeypatch):
    """The issue's fact 1 as it was: tokunseba_reasoning_store=off is today's behaviour."""
    m = start(ups, tmp_path, "--set", "tokunseba_reasoning_store=off")
    try:
        point_clients_at(m, monkeypatch)
        ds = DeepSeekChat(tool_turns=3)
        ups["ds"].script()
        ups["ds"].responder = ds
        with pytest.raises(anthropic.BadRequestError) as e:
            loop(anthropic.Anthropic(api_key="sk-ant-client", max_retries=0), "claude-ds-1", True)
        assert DEEPSEEK_400 in str(e.value) and len(ds.rejected) == 1
    finally:
        m.stop()


def test_continued_to_another_endpoint_carries_no_stored_state(proxy, ups, monkeypatch):
    """Isolation: the same conversation sent on to another endpoint and model gets none of
    DeepSeek's reasoning (bytes checked), and the withholding is recorded."""
    point_clients_at(proxy, monkeypatch)
    ds = DeepSeekChat(tool_turns=1)
    ups["ds"].script()
    ups["ds"].responder = ds
    client = anthropic.Anthropic(api_key="sk-ant-client", max_retries=0)
    with client.messages.stream(model="claude-ds-1", max_tokens=500, tools=BASH,
                                messages=[{"role": "user", "content": "one step please"}]) as s:
        first = s.get_final_message()
    assert first.stop_reason == "tool_use"
    tu = next(b for b in first.content if b.type == "tool_use")
    ups["other"].responder = None
    ups["other"].script(Reply.json({"id": "x", "object": "chat.completion", "created": 1, "model": "other-model",
                                    "choices": [{"index": 0, "finish_reason": "stop",
                                                 "message": {"role": "assistant", "content": "fine"}}],
                                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}))
    client.messages.create(model="claude-other-1", max_tokens=500, tools=BASH, messages=[
        {"role": "user", "content": "one step please"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tu.id, "content": "ok"}]},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "now something else"}])  # a new user turn: routed by its rule (no loop)
    raw = ups["other"].requests[-1].body
    assert tu.id.encode() in raw
    assert b"reasoning" not in raw and ds.issued[tu.id].encode() not in raw and b"ds-thought" not in raw
    ledger_settled(proxy.ledger)
    withheld = [e for e in events(proxy.ledger, "state_withheld") if tu.id in e["keys"]]
    assert withheld and withheld[0]["origin"] == "ds/deepseek-reasoner" and withheld[0]["to"] == "other/other-model"


def test_a_restarted_proxy_still_restores_and_its_store_is_private(ups, tmp_path, monkeypatch):
    ds = DeepSeekChat(tool_turns=2)
    ups["ds"].script()
    ups["ds"].responder = ds
    m = start(ups, tmp_path)
    try:
        point_clients_at(m, monkeypatch)
        client = anthropic.Anthropic(api_key="sk-ant-client", max_retries=0)
        with client.messages.stream(model="claude-ds-1", max_tokens=500, tools=BASH,
                                    messages=[{"role": "user", "content": "two steps"}]) as s:
            first = s.get_final_message()
        ledger_settled(m.ledger)
    finally:
        m.stop()
    store = tmp_path / "reasoning.db"
    assert stat.S_IMODE(os.stat(store).st_mode) == 0o600
    m = start(ups, tmp_path)  # a new process: only the file remembers
    try:
        point_clients_at(m, monkeypatch)
        tu = next(b for b in first.content if b.type == "tool_use")
        messages = [{"role": "user", "content": "two steps"},
                    {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tu.id, "content": "ok"}]}]
        client = anthropic.Anthropic(api_key="sk-ant-client", max_retries=0)  # through the new proxy
        final, _ = loop(client, "claude-ds-1", True, messages)
        assert ds.rejected == [] and final.content[-1].text == "All 2 steps done."
        ledger_settled(m.ledger)
        assert any(tu.id in e["keys"] for e in events(m.ledger, "state_restored"))
    finally:
        m.stop()


def test_a_corrupted_store_degrades_to_no_restore_recorded_never_a_traceback(ups, tmp_path, monkeypatch):
    (tmp_path / "reasoning.db").write_bytes(b"this is not a database, it was damaged" * 100)
    ds = DeepSeekChat(tool_turns=1)
    ups["ds"].script()
    ups["ds"].responder = ds
    m = start(ups, tmp_path)
    try:
        point_clients_at(m, monkeypatch)
        client = anthropic.Anthropic(api_key="sk-ant-client", max_retries=0)
        final, _ = loop(client, "claude-ds-1", True)  # memory only: this process still restores
        assert ds.rejected == [] and final.content[-1].text == "All 1 steps done."
        ledger_settled(m.ledger)
        unavailable = events(m.ledger, "state_unavailable")
        assert unavailable and "reasoning.db" in unavailable[0]["problem"]
        con = sqlite3.connect(m.ledger)
        rid = con.execute("SELECT request_id FROM events WHERE kind = 'state_unavailable' LIMIT 1").fetchone()[0]
        con.close()
        out = subprocess.run([str(BIN / "tokunseba"), "explain", rid, "--ledger", str(m.ledger)],
                             capture_output=True, text=True)
        assert out.returncode == 0 and "store unavailable, nothing restored from it" in out.stdout, out.stderr
        assert "Traceback" not in m.log() and "cannot open the reasoning store" in m.log()
    finally:
        m.stop()


BASH_CHAT = [{"type": "function", "function": {"name": "Bash", "description": "run a shell command", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]


def chat_loop(client: openai.OpenAI, stream: bool, turns: int = 6, model: str = "gpt-ant-1", **kw):
    """A Chat client's tool loop: every tool call answered until the model stops."""
    messages = [{"role": "user", "content": "run the three steps"}]
    for _ in range(turns):
        args = dict(model=model, tools=BASH_CHAT, messages=messages, **kw)
        if stream:
            with client.chat.completions.stream(**args) as s:
                done = s.get_final_completion()
        else:
            done = client.chat.completions.create(**args)
        msg = done.choices[0].message
        entry = {"role": "assistant", "content": msg.content}
        if msg.tool_calls:
            entry["tool_calls"] = [{"id": c.id, "type": "function",
                                    "function": {"name": c.function.name, "arguments": c.function.arguments}}
                                   for c in msg.tool_calls]
        messages.append(entry)
        if not msg.tool_calls:
            return msg, messages
        messages += [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in msg.tool_calls]
    raise AssertionError("the loop did not end")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_chat_client_effort_reaches_anthropic_and_its_signed_thinking_comes_back_first(proxy, ups, monkeypatch, stream):
    """Facts 2 and 4: reasoning_effort high arrives as thinking with a budget, and each
    follow-up's assistant message starts with the signed block the endpoint made for it."""
    point_clients_at(proxy, monkeypatch)
    ant = AnthropicThinking(tool_turns=3)
    ups["ant"].script()
    ups["ant"].responder = ant
    client = openai.OpenAI(api_key="sk-oai-client", max_retries=0)
    msg, messages = chat_loop(client, stream, reasoning_effort="high", max_completion_tokens=8000)
    assert ant.rejected == [] and msg.content == "All 3 steps done."
    assert ant.thinking_requests == [{"type": "enabled", "budget_tokens": 4000}] * 4  # high, half of max_tokens
    last = ups["ant"].requests[-1].json()["messages"]
    firsts = [m["content"][0] for m in last if m["role"] == "assistant"]
    assert [b["type"] for b in firsts] == ["thinking"] * 3
    assert all(b["signature"] == ant.sign(b["thinking"]) for b in firsts)  # the endpoint's own, byte for byte
    # the Chat client never got a signature
    assert all("sig-" not in json.dumps(m) for m in messages)
    ledger_settled(proxy.ledger)
    conv = [e for e in events(proxy.ledger, "protocol_translated") if e["to"] == "anthropic"]
    assert any("reasoning_effort 'high' -> thinking.budget_tokens 4000 (capped under max_tokens)" in e["converted"]
               for e in conv)


def test_without_restore_anthropic_thinking_rejects_the_loop(ups, tmp_path, monkeypatch):
    """Fact 4 as it would be with effort carried but no store."""
    m = start(ups, tmp_path, "--set", "tokunseba_reasoning_store=off")
    try:
        point_clients_at(m, monkeypatch)
        ant = AnthropicThinking(tool_turns=3)
        ups["ant"].script()
        ups["ant"].responder = ant
        with pytest.raises(openai.BadRequestError) as e:
            chat_loop(openai.OpenAI(api_key="sk-oai-client", max_retries=0), True, reasoning_effort="high",
                      max_completion_tokens=8000)
        assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in str(e.value)
    finally:
        m.stop()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_a_loop_finishes_where_it_started(proxy, ups, monkeypatch, stream):
    """Fact 5: a rule on turn shape would send the loop's follow-ups (tool results, no user
    text) to another endpoint; they follow the loop to DeepSeek instead, its reasoning restored."""
    point_clients_at(proxy, monkeypatch)
    ds = DeepSeekChat(tool_turns=3)
    ups["ds"].script()
    ups["ds"].responder = ds
    ups["other"].responder = None
    ups["other"].script()
    final, _ = loop(anthropic.Anthropic(api_key="sk-ant-client", max_retries=0), "claude-mix-1", stream)
    assert ds.rejected == [] and final.content[-1].text == "All 3 steps done."
    assert len(ups["ds"].requests) == 4 and ups["other"].requests == []
    ledger_settled(proxy.ledger)
    followed = [e for e in events(proxy.ledger, "tool_loop") if e["followed"] and e["route"] == "plan-on-ds"]
    assert len(followed) >= 3 and all("made by ds/deepseek-reasoner" in e["why"] for e in followed)
    con = sqlite3.connect(proxy.ledger)
    rid = con.execute("SELECT request_id FROM events WHERE kind = 'tool_loop' AND data LIKE '%plan-on-ds%' "
                      "ORDER BY id DESC LIMIT 1").fetchone()[0]
    con.close()
    out = subprocess.run([str(BIN / "tokunseba"), "explain", rid, "--ledger", str(proxy.ledger)],
                         capture_output=True, text=True, check=True).stdout
    assert "followed its loop, not its rule" in out and "rest-elsewhere" not in out.split("events")[0].split(
        "decision")[1].splitlines()[0]


def test_tool_loops_route_sends_the_middle_of_a_loop_by_its_rule(ups, tmp_path, monkeypatch):
    m = start(ups, tmp_path, top="tool_loops: route\n")
    try:
        point_clients_at(m, monkeypatch)
        ds = DeepSeekChat(tool_turns=3)
        ups["ds"].script()
        ups["ds"].responder = ds
        ups["other"].responder = None
        ups["other"].script(Reply.json({"id": "x", "object": "chat.completion", "created": 1, "model": "other-model",
                                        "choices": [{"index": 0, "finish_reason": "stop",
                                                     "message": {"role": "assistant", "content": "elsewhere"}}],
                                        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}))
        final, _ = loop(anthropic.Anthropic(api_key="sk-ant-client", max_retries=0), "claude-mix-1", False)
        assert final.content[-1].text == "elsewhere" and len(ups["ds"].requests) == 1
        assert b"ds-thought" not in ups["other"].requests[0].body  # its state stayed behind, recorded
        ledger_settled(m.ledger)
        assert events(m.ledger, "state_withheld") and not events(m.ledger, "tool_loop")
    finally:
        m.stop()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("with_ids", [False, True], ids=["ids-made-by-the-proxy", "gemini-ids"])
def test_gemini_function_calls_go_back_with_their_real_signature(proxy, ups, monkeypatch, stream, with_ids):
    """Fact 3: each call of the loop goes back with the thoughtSignature Gemini gave it, not the skip value."""
    point_clients_at(proxy, monkeypatch)
    gem = GeminiSignatures(tool_turns=3, with_ids=with_ids)
    ups["gem"].script()
    ups["gem"].responder = gem
    msg, _ = chat_loop(openai.OpenAI(api_key="sk-oai-client", max_retries=0), stream, model="gpt-gem-1")
    assert gem.rejected == [] and msg.content == "All 3 steps done."
    assert gem.skipped == 0
    last = ups["gem"].requests[-1].json()["contents"]
    sigs = [p["thoughtSignature"] for c in last if c["role"] == "model" for p in c["parts"] if "functionCall" in p]
    assert len(sigs) == 3 and set(sigs) <= gem.issued and SKIP_SIGNATURE.encode() not in ups["gem"].requests[-1].body


def test_without_a_store_gemini_gets_the_skip_value(ups, tmp_path, monkeypatch):
    m = start(ups, tmp_path, "--set", "tokunseba_reasoning_store=off")
    try:
        point_clients_at(m, monkeypatch)
        gem = GeminiSignatures(tool_turns=3)
        ups["gem"].script()
        ups["gem"].responder = gem
        msg, _ = chat_loop(openai.OpenAI(api_key="sk-oai-client", max_retries=0), True, model="gpt-gem-1")
        assert msg.content == "All 3 steps done." and gem.skipped == 1 + 2 + 3  # every call, every turn
    finally:
        m.stop()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_responses_reasoning_items_go_back_before_their_calls(proxy, ups, monkeypatch, stream):
    """An Anthropic client's loop on a Responses reasoning model: each follow-up carries the
    reasoning item (id, summary, encrypted_content) the endpoint made, right before its call."""
    point_clients_at(proxy, monkeypatch)
    rr = ResponsesReasoning(tool_turns=3)
    ups["resp"].script()
    ups["resp"].responder = rr
    final, _ = loop(anthropic.Anthropic(api_key="sk-ant-client", max_retries=0), "claude-resp-1", stream)
    assert rr.rejected == [] and final.content[-1].text == "All 3 steps done."
    items = ups["resp"].requests[-1].json()["input"]
    pairs = [(items[i - 1], it) for i, it in enumerate(items) if it["type"] == "function_call"]
    assert len(pairs) == 3
    for reasoning, call in pairs:
        assert (reasoning["type"], reasoning["id"], reasoning["encrypted_content"]) == (
            "reasoning", *rr.issued[call["call_id"]])
        assert reasoning["summary"][0]["text"].startswith("Plan step")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_responses_sdk_loop_against_deepseek_thinking(proxy, ups, monkeypatch, stream):
    """The third SDK client: a Responses client's function-call loop on DeepSeek's thinking mode."""
    point_clients_at(proxy, monkeypatch)
    ds = DeepSeekChat(tool_turns=3)
    ups["ds"].script()
    ups["ds"].responder = ds
    client = openai.OpenAI(api_key="sk-oai-client", max_retries=0)
    tools = [{"type": "function", "name": "Bash", "description": "run a command", "strict": False,
              "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}]
    items: list = [{"role": "user", "content": "run the three steps"}]
    for _ in range(6):
        if stream:
            with client.responses.stream(model="gpt-ds-1", input=items, tools=tools) as s:
                resp = s.get_final_response()
        else:
            resp = client.responses.create(model="gpt-ds-1", input=items, tools=tools)
        calls = [o for o in resp.output if o.type == "function_call"]
        if not calls:
            break
        items += [o.model_dump(exclude_none=True) for o in resp.output]
        items += [{"type": "function_call_output", "call_id": c.call_id, "output": "ok"} for c in calls]
    assert ds.rejected == [] and resp.output_text == "All 3 steps done."
    last = ups["ds"].requests[-1].json()["messages"]
    assert {m["tool_calls"][0]["id"]: m["reasoning_content"] for m in last if m.get("tool_calls")} == ds.issued


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_genai_sdk_thinking_level_reaches_anthropic_and_the_loop_keeps_its_signed_thinking(proxy, ups, monkeypatch,
                                                                                          stream):
    """Gemini's SDK: thinkingConfig crosses to Anthropic thinking, and each function-call turn
    goes back with the signed thinking block first."""
    from google import genai
    from google.genai import types

    point_clients_at(proxy, monkeypatch)
    ant = AnthropicThinking(tool_turns=3)
    ups["ant"].script()
    ups["ant"].responder = ant
    sdk = genai.Client(api_key="AIza-client-key", http_options=types.HttpOptions(api_version="v1beta"))
    cfg = types.GenerateContentConfig(
        max_output_tokens=12000, thinking_config=types.ThinkingConfig(thinking_level="HIGH"),
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
            name="Bash", description="run a command",
            parameters_json_schema={"type": "object", "properties": {"command": {"type": "string"}}})])])
    contents = [types.Content(role="user", parts=[types.Part(text="run the three steps")])]
    for _ in range(6):
        if stream:
            chunks = list(sdk.models.generate_content_stream(model="sdk-ant-1", contents=contents, config=cfg))
            calls = [fc for c in chunks for fc in c.function_calls or []]
            text = "".join(p.text for c in chunks if c.candidates and c.candidates[0].content
                           for p in c.candidates[0].content.parts or [] if p.text and not p.thought)
        else:
            r = sdk.models.generate_content(model="sdk-ant-1", contents=contents, config=cfg)
            calls = r.function_calls or []
            text = "".join(p.text for p in r.candidates[0].content.parts or [] if p.text and not p.thought)
        if not calls:
            break
        contents.append(types.Content(role="model", parts=[types.Part(function_call=fc) for fc in calls]))
        contents.append(types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
            id=fc.id, name=fc.name, response={"output": "ok"})) for fc in calls]))
    assert ant.rejected == [] and text == "All 3 steps done."
    assert ant.thinking_requests == [{"type": "enabled", "budget_tokens": 6000}] * 4  # high, half of 12000
    firsts = [m["content"][0] for m in ups["ant"].requests[-1].json()["messages"] if m["role"] == "assistant"]
    assert [b["type"] for b in firsts] == ["thinking"] * 3
