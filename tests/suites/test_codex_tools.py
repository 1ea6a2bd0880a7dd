"""Codex as shipped, to any endpoint (issue 27): its freeform and namespaced tools travel as a
declared two-way encoding (neutral/tools.py), and come back in Codex's own shapes.

- encode -> decode gives the declaration and the call back byte for byte, for any input text,
  through every upstream protocol, streamed (at every split) and whole;
- the streamed custom input decoded at every split is tested beside neutral/tools.py
  (tests/neutral/test_tools.py);
- every way peers' mappings broke, replayed as a fixture with its expected outcome.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, HealthCheck, settings, strategies as st

from tokunseba import jsonc, translate as tr
from tokunseba.neutral.events import BlockDelta, BlockStart, BlockStop, MessageStart, MessageStop
from tokunseba.neutral.message import Message
from tokunseba.neutral.report import ReplyReport
from tokunseba.neutral.tools import ClientTool, freeform_arguments
from tokunseba.protocols.openai_responses import flat_tool_name

from tests.suites.test_spread_tool_calls import chunk
from tests.support.codex_patch import JS
from tests.translate.openai_responses.test_stream import check_responses_grammar, responses_events, responses_final

DATA = Path(__file__).resolve().parents[1] / "data" / "codex"
CREATED = 1767225600
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UPSTREAMS = ("openai", "anthropic", "gemini")
LITE_TOOLS = {"exec": ClientTool("exec", "functions", freeform=True),
              "clock__sleep": ClientTool("sleep", "clock"),
              "mcp__files__read": ClientTool("read", "mcp__files__")}


def codex(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def upstream_stream(protocol: str, calls: list[tuple[str, str, str]], pieces: int = 4) -> bytes:
    """A reply of tool calls (id, neutral name, arguments text) as ``protocol`` streams it."""
    evs: list = [MessageStart("msg_codex01", "model-x")]
    for n, (cid, name, args) in enumerate(calls):
        evs.append(BlockStart(n, "tool_use", id=cid, name=name))
        step = max(1, len(args) // pieces)
        evs += [BlockDelta(n, args[k:k + step]) for k in range(0, len(args), step)]
        evs.append(BlockStop(n))
    evs.append(MessageStop("tool_use"))
    enc = tr.CODECS[protocol].stream_encoder(ReplyReport(), True, CREATED)
    return b"".join(enc.encode(e) for e in evs)


def upstream_whole(protocol: str, calls: list[tuple[str, str, str]]) -> bytes:
    evs: list = [MessageStart("msg_codex01", "model-x")]
    for n, (cid, name, args) in enumerate(calls):
        evs += [BlockStart(n, "tool_use", id=cid, name=name), BlockDelta(n, args), BlockStop(n)]
    evs.append(MessageStop("tool_use"))
    return tr.CODECS[protocol].encode_reply(Message.collect(evs), ReplyReport(), CREATED)[0]


def to_codex(protocol: str, raw: bytes, cuts: list[int] | None = None, tools=LITE_TOOLS):
    t = tr.stream(protocol, "openai-responses", created=CREATED, client_tools=tools)
    parts, last = [], 0
    for c in cuts or ():
        parts.append(t.feed(raw[last:c]))
        last = c
    return b"".join(parts) + t.feed(raw[last:]) + t.close(), t


# ---------------------------------------------------------------------------------------
# the request: Codex's default-model turn, as captured from Codex 0.171.0
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["openai", "anthropic", "gemini"])
def test_the_default_model_turn_translates_to_every_protocol(target):
    body = codex("default-turn.json")
    assert body["model"] == "gpt-6.2-sol" and "tools" not in body and body["input"][0]["type"] == "additional_tools"
    rt = tr.request("openai-responses", target, body, model="m", max_tokens=4096)
    declared = [(ns["name"], t) for ns in body["input"][0]["tools"] for t in ns["tools"]]
    flat = [flat_tool_name(ns, t["name"]) for ns, t in declared]
    assert flat[:2] == ["exec", "wait"] and "clock__sleep" in flat and "collaboration__spawn_agent" in flat
    wire = jsonc.dumps(rt.body)
    for (ns, t), name in zip(declared, flat, strict=True):
        assert jsonc.dumps(name) in wire
        assert jsonc.dumps(t["description"])[1:-1] in wire  # descriptions verbatim
        assert rt.client_tools[name][:3] == (t["name"], ns, t["type"] == "custom")
    exec_tool = declared[0][1]
    assert exec_tool["type"] == "custom"
    assert jsonc.dumps(exec_tool["format"]["definition"])[1:-1] in wire  # the grammar, moved verbatim
    assert any("additional_tools item: 12 tools hoisted" in c for c in rt.converted)
    assert "input[0].tools[1].description" in rt.dropped  # a namespace's own description


def test_the_follow_ups_carry_their_calls_wrapped_with_their_ids():
    rt = tr.request("openai-responses", "anthropic", codex("default-exec-followup.json"), model="m", max_tokens=4096)
    call, result = rt.body["messages"][-2]["content"][-1], rt.body["messages"][-1]["content"][0]
    src = codex("default-exec-followup.json")["input"][-2]
    assert call == {"type": "tool_use", "id": src["call_id"], "name": "exec", "input": {"input": src["input"]}}
    assert result["tool_use_id"] == src["call_id"]
    rt = tr.request("openai-responses", "openai", codex("default-namespaced-followup.json"), model="m")
    call = rt.body["messages"][-2]["tool_calls"][0]
    assert call["function"]["name"] == "clock__sleep" and call["id"] == "call_sleep01"


def test_two_tools_behind_one_flat_name_refuse_the_route():
    body = {"model": "m", "input": "hi", "tools": [
        {"type": "function", "name": "clock__sleep"},
        {"type": "namespace", "name": "clock", "tools": [{"type": "function", "name": "sleep"}]}]}
    with pytest.raises(tr.TranslationError) as e:
        tr.request("openai-responses", "anthropic", body, max_tokens=10)
    assert e.value.kind == "refused" and "'clock.sleep'" in e.value.message and "'clock__sleep'" in e.value.message


# ---------------------------------------------------------------------------------------
# the reply: back into Codex's shapes
# ---------------------------------------------------------------------------------------

def _items(out: bytes) -> list[dict]:
    check_responses_grammar(responses_events(out))
    return [it.model_dump(exclude_none=True) for it in responses_final(out).output]


@pytest.mark.parametrize("upstream", UPSTREAMS)
def test_calls_come_back_as_codex_declared_them(upstream):
    calls = [("call_x1", "exec", freeform_arguments(JS)), ("call_x2", "clock__sleep", '{"duration_ms":10}'),
             ("call_x3", "mcp__files__read", '{"path":"a"}')]
    out, t = to_codex(upstream, upstream_stream(upstream, calls))
    items = _items(out)
    assert [(i["type"], i.get("namespace"), i["name"], i["call_id"]) for i in items] == [
        ("custom_tool_call", "functions", "exec", "call_x1"), ("function_call", "clock", "sleep", "call_x2"),
        ("function_call", "mcp__files__", "read", "call_x3")]
    assert items[0]["input"] == JS  # byte for byte
    assert json.loads(items[1]["arguments"]) == {"duration_ms": 10}
    assert not t.report.warnings
    # the whole reply ends in the same items
    whole = json.loads(tr.reply(upstream, "openai-responses", upstream_whole(upstream, calls), created=CREATED,
                                client_tools=LITE_TOOLS).body)
    assert [{k: v for k, v in i.items() if k != "id"} for i in whole["output"]] == [
        {k: v for k, v in i.items() if k != "id"} for i in items]


@SETTINGS
@given(st.text(min_size=0, max_size=80), st.sampled_from(UPSTREAMS), st.data())
def test_any_input_round_trips_byte_for_byte_at_any_split(text, upstream, data):
    raw = upstream_stream(upstream, [("call_p1", "exec", freeform_arguments(text))], pieces=7)
    out, _ = to_codex(upstream, raw)
    (item,) = _items(out)
    assert item["type"] == "custom_tool_call" and item["input"] == text
    deltas = [e["delta"] for e in responses_events(out) if e["type"] == "response.custom_tool_call_input.delta"]
    assert "".join(deltas) == text  # streamed as it arrived, no wrapper fragment
    cuts = sorted(data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=8, unique=True)))
    assert to_codex(upstream, raw, cuts)[0] == out


# ---------------------------------------------------------------------------------------
# what broke in peers' mappings, replayed (user-needs: "what breaks in practice")
# ---------------------------------------------------------------------------------------

def _one_call(upstream: str, name: str, args: str):
    out, t = to_codex(upstream, upstream_stream(upstream, [("call_peer1", name, args)]))
    (item,) = _items(out)
    return item, t.report.warnings, out


@pytest.mark.parametrize("upstream", UPSTREAMS)
def test_peer_a_call_made_with_empty_arguments_is_handed_back_raw(upstream):
    """9router#1371: the model called the freeform tool with {} (its schema was empty
    there). Here the schema requires 'input'; when a model still sends {}, Codex gets the raw
    text as the input (its tool then tells the model why), recorded: never a guess."""
    item, warnings, _ = _one_call(upstream, "exec", "{}")
    assert item["type"] == "custom_tool_call" and item["input"] == "{}"
    assert any(w.startswith("unwrap_failed: exec") for w in warnings)


@pytest.mark.parametrize(("args", "why"), [
    ('{"input": "a", "extra": 1}', "another key"),
    ('{"command": ["*** Begin Patch"]}', "gemma's wrapper (openai/codex#35361)"),
    ('{"input": 42}', "not a string"),
])
def test_peer_arguments_that_are_not_exactly_the_encoding_go_back_raw(args, why):
    item, warnings, _ = _one_call("anthropic", "exec", args)
    assert item["input"] == args, why  # the model's raw text, as it came
    assert any(w.startswith("unwrap_failed") for w in warnings)


def test_peer_arguments_that_are_not_json_go_back_raw():
    """A Chat upstream's arguments are a string the model wrote: not JSON at all."""
    raw = b"".join([chunk({"role": "assistant", "content": ""}),
                    chunk({"tool_calls": [{"index": 0, "id": "call_nj", "type": "function",
                                           "function": {"name": "exec", "arguments": "*** Begin Patch\n"}}]}),
                    chunk({}, "tool_calls"), b"data: [DONE]\n\n"])
    out, t = to_codex("openai", raw)
    (item,) = _items(out)
    assert item["input"] == "*** Begin Patch\n" and any(w.startswith("unwrap_failed") for w in t.report.warnings)


def test_peer_tools_dropped_so_the_patch_came_back_as_text():
    """workbuddy PR #12, openai/codex#36942: the tools were dropped and the model printed the
    patch as text with a 200. Here every declared tool reaches the endpoint."""
    rt = tr.request("openai-responses", "openai", codex("default-turn.json"), model="m")
    assert len(rt.body["tools"]) == 12 and rt.body["tools"][0]["function"]["name"] == "exec"


def test_peer_a_function_call_returned_where_codex_expects_custom_tool_call():
    """copilot-api#242: a function_call came back for the freeform tool."""
    item, _, out = _one_call("openai", "exec", freeform_arguments(JS))
    assert item["type"] == "custom_tool_call" and b"function_call" not in out


def test_peer_wrapper_fragments_leaking_into_the_streamed_input():
    """CPA buffers because JSON wrapper fragments leaked into the bare-input stream: here the
    deltas are the decoded input alone, at every split of the upstream's bytes."""
    raw = upstream_stream("anthropic", [("call_w", "exec", freeform_arguments(JS))], pieces=40)
    for cut in range(1, len(raw), 7):
        out, _ = to_codex("anthropic", raw, [cut])
        deltas = [e["delta"] for e in responses_events(out) if e["type"] == "response.custom_tool_call_input.delta"]
        assert "".join(deltas) == JS and not any('{"input"' in d for d in deltas)


def test_peer_names_that_lost_their_namespace():
    """CPA#4255: 'unsupported call: codegraph_search' — the namespace was lost. Codex routes
    by (namespace, name): both come back exactly as declared."""
    item, _, _ = _one_call("gemini", "mcp__files__read", '{"path":"x"}')
    assert (item["namespace"], item["name"]) == ("mcp__files__", "read")


def test_peer_history_replayed_without_the_same_wrapping():
    """CPA PR #3790: history must be wrapped as the live call was: the replayed
    custom_tool_call becomes exactly the arguments the model produced."""
    args = freeform_arguments(JS)
    item, _, _ = _one_call("openai", "exec", args)
    body = {"model": "m", "input": [{"type": "message", "role": "user", "content": "go"}, item,
                                    {"type": "custom_tool_call_output", "call_id": item["call_id"], "output": "ok"}]}
    rt = tr.request("openai-responses", "openai", body, model="m")
    assert rt.body["messages"][1]["tool_calls"][0]["function"]["arguments"] == args


def test_held_out_custom_tool_whose_name_arrives_late():
    """Issue 33's held-out case: a Chat upstream sends the call's id first and its name (the
    freeform tool's) in the next chunk: Codex gets a custom_tool_call with its input."""
    args = freeform_arguments(JS)
    raw = b"".join([chunk({"role": "assistant", "content": ""}),
                    chunk({"tool_calls": [{"index": 0, "id": "call_late", "type": "function", "function": {"arguments": ""}}]}),
                    chunk({"tool_calls": [{"index": 0, "function": {"name": "exec"}}]}),
                    *[chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[k:k + 9]}}]})
                      for k in range(0, len(args), 9)],
                    chunk({}, "tool_calls"), b"data: [DONE]\n\n"])
    out, t = to_codex("openai", raw)
    (item,) = _items(out)
    assert (item["type"], item["call_id"], item["name"], item["input"]) == ("custom_tool_call", "call_late", "exec", JS)


# ---------------------------------------------------------------------------------------
# rules see the default turn as it is, and the shipped example routes its easy turns
# ---------------------------------------------------------------------------------------

def test_rules_count_the_tools_inside_the_namespaces():
    from tokunseba.protocols import openai_responses

    assert openai_responses.FACTS.rule_shape.tool_count(codex("default-turn.json")) == 12


def test_the_codex_example_routes_questions_and_passes_the_rest():
    from tokunseba.routing import decide, load_rules_text, turn_facts

    path = Path(__file__).resolve().parents[2] / "rules" / "examples" / "codex-easy-turns.yaml"
    rules = load_rules_text(path.read_text(), str(path))
    body = codex("default-turn.json")
    assert body["input"][-1]["content"][0]["text"] == "make hello.txt"
    d = decide(rules, turn_facts("openai-responses", body, len(jsonc.dumpb(body)), {}))
    assert d.action == "pass"  # a change to make: OpenAI
    question = json.loads(json.dumps(body))
    question["input"][-1]["content"][0]["text"] = "explain what main.py does"
    d = decide(rules, turn_facts("openai-responses", question, len(jsonc.dumpb(question)), {}))
    assert d.action == "route" and d.route is not None and d.route.name == "codex-questions"
    rt = tr.request("openai-responses", "anthropic", question, model="claude-haiku-4-5", max_tokens=8192)
    assert rt.body["tools"][0]["name"] == "exec"


NS = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
TOOL_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)


@SETTINGS
@given(st.one_of(st.none(), NS), TOOL_NAME, st.text(max_size=40), st.one_of(st.none(), st.text(min_size=1, max_size=40)),
       st.sampled_from(["openai", "anthropic", "gemini"]))
def test_a_freeform_declaration_comes_back_byte_for_byte(ns, name, description, grammar, target):
    """What the endpoint gets, and the map beside it, give the client's declaration back: its
    name and namespace (the map), its description (verbatim) and its grammar (verbatim, as the
    'input' parameter's description)."""
    tool: dict = {"type": "custom", "name": name, "description": description}
    if grammar is not None:
        tool["format"] = {"type": "grammar", "syntax": "lark", "definition": grammar}
    tools = [{"type": "namespace", "name": ns, "tools": [tool]}] if ns else [tool]
    rt = tr.request("openai-responses", target, {"model": "m", "input": "hi", "tools": tools}, model="m", max_tokens=64)
    flat = flat_tool_name(ns, name)
    assert rt.client_tools[flat] == ClientTool(name, ns, freeform=True,
                                               grammar=("lark", grammar) if grammar is not None else None)
    if target == "openai":
        fn = rt.body["tools"][0]["function"]
        got_name, got_desc, schema = fn["name"], fn.get("description"), fn["parameters"]
    elif target == "anthropic":
        t = rt.body["tools"][0]
        got_name, got_desc, schema = t["name"], t.get("description"), t["input_schema"]
        assert t.get("type") in (None, "custom") and "format" not in t  # never Anthropic's own "custom" meaning
    else:
        fd = rt.body["tools"][0]["functionDeclarations"][0]
        got_name, got_desc = fd["name"], fd.get("description")
        schema = fd.get("parametersJsonSchema") or fd.get("parameters")
    assert got_name == flat and (got_desc == description or (target, description, got_desc) == ("gemini", "", None))
    assert schema["required"] == ["input"]  # (Gemini leaves an empty description out: it says nothing)
    assert schema["properties"]["input"].get("description") == grammar


def test_codex_remote_compaction_is_refused_elsewhere_never_invented():
    """Codex's remote compaction (captured: the history plus {"type": "compaction_trigger"})
    wants an encrypted compaction item only OpenAI makes: refused for another endpoint, so it
    goes on to OpenAI; so is a later turn holding the encrypted item."""
    body = codex("default-exec-followup.json")
    body["input"].append({"type": "compaction_trigger"})
    for target in ("openai", "anthropic", "gemini"):
        with pytest.raises(tr.TranslationError) as e:
            tr.request("openai-responses", target, body, model="m", max_tokens=64)
        assert e.value.kind == "refused" and "compaction_trigger item" in e.value.message
    body["input"][-1] = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA"}
    with pytest.raises(tr.TranslationError) as e:
        tr.request("openai-responses", "anthropic", body, model="m", max_tokens=64)
    assert e.value.kind == "refused" and "compaction item" in e.value.message
