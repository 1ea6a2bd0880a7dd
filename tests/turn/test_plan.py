"""The pure planning of one turn (tokunseba.turn): outcomes, credentials, the byte-exact
model rewrite of a retarget, refusals, reply modes, client-protocol errors and the one-line
summary mitmweb shows. No mitmproxy here (docs/dev/architecture.md §3: pure core, thin adapter)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokunseba.routing import load_rules_text
from tokunseba.credentials import CREDENTIAL_NAMES as CREDENTIAL_HEADERS
from tokunseba.turn.plan import REQUEST_ID_HEADER, LocalResponse, Turn, apply_header_changes, replace_top_level_model
from tokunseba.turn.reply import response_mode

from tests.support.planning import plan_request

CLIENT_KEY = "sk-ant-client-SECRET-0001"
LOCAL_KEY = "sk-local-endpoint-SECRET-0002"
REMOTE_KEY = "sk-remote-endpoint-SECRET-0003"
ENV = {"LOCAL_KEY": LOCAL_KEY, "REMOTE_KEY": REMOTE_KEY, "ANTHROPIC_API_KEY": "sk-builtin-SECRET-0004"}

RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:8000/v1
    key_env: LOCAL_KEY
  nokey:
    protocol: openai
    url: http://127.0.0.1:8001/v1
  remote-ant:
    protocol: anthropic
    url: https://llm.example.com/v1
    key_env: REMOTE_KEY
  same-ant:
    protocol: anthropic
    url: https://api.anthropic.com/v1
    key_env: REMOTE_KEY
  remote-oai:
    protocol: openai
    url: https://oai.example.net/v1
    key_env: REMOTE_KEY
  gem:
    protocol: gemini
    url: http://127.0.0.1:8002/v1beta
routes:
  - name: to-gemini
    when: {client: anthropic, model: "gem-*"}
    to: gem
  - name: gemini-or-error
    when: {client: anthropic, model: "strict-*"}
    to: gem
    on_refused: error
  - name: secret-header
    when: {client: anthropic, model: "hdr-*", header: {x-api-key: some-other-value}}
    to: local
  - name: easy-turns
    when: {client: anthropic, model: ["claude-*", "gem-*", "hdr-*"]}
    to: local
  - name: keyless
    when: {client: anthropic, model: "nokey-*"}
    to: nokey
  - name: cross-retarget
    when: {client: anthropic, model: "far-*"}
    to: remote-ant
    model: far-model
  - name: same-retarget
    when: {client: anthropic, model: "near-*"}
    to: same-ant
    model: near-model
  - name: oai-retarget
    when: {client: openai, model: "far-*"}
    to: remote-oai
  - name: to-anthropic
    when: {client: openai, model: "gpt-*"}
    to: remote-ant
"""


@pytest.fixture(scope="module")
def rules():
    return load_rules_text(RULES, "test-rules.yaml")


ANT_HEADERS = [("Host", "api.anthropic.com"), ("X-Api-Key", CLIENT_KEY), ("Anthropic-Version", "2023-06-01"),
               ("anthropic-beta", "fine-grained-tool-streaming-2025-05-14"), ("Cookie", "session=SECRET-cookie"),
               ("Content-Type", "application/json"), ("User-Agent", "claude-cli/2.0")]
OAI_HEADERS = [("host", "api.openai.com"), ("authorization", f"Bearer {CLIENT_KEY}"),
               ("openai-organization", "org-SECRET"), ("content-type", "application/json")]


def ant_body(model: str = "claude-haiku-4-5", **extra) -> bytes:
    return json.dumps({"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], **extra}).encode()


def orphan_result_body(model: str) -> bytes:
    """A valid Anthropic turn Gemini cannot carry: its tool's name starts with a digit, which
    Anthropic allows and Gemini's FunctionDeclaration.name rejects, so a Gemini target
    refuses it (the other targets take it)."""
    return json.dumps({"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "zip it"}],
                       "tools": [{"name": "7zip", "description": "pack files",
                                  "input_schema": {"type": "object", "properties": {}}}]}).encode()


ORPHAN_REFUSAL = "Gemini rejects the function name '7zip'"


def plan(rules, body: bytes, *, host="api.anthropic.com", path="/v1/messages", headers=ANT_HEADERS, port=443,
         env=ENV, **kw) -> Turn | None:
    return plan_request(rules, method="POST", host=host, port=port, path=path, headers=headers, body=body, env=env, **kw)


def plan_oai(rules, body: dict, **kw) -> Turn | None:
    body = {"max_tokens": 32, **body}
    return plan(rules, json.dumps(body).encode(), host="api.openai.com", path="/v1/chat/completions",
                headers=OAI_HEADERS, **kw)


def removed(turn: Turn, headers) -> set[str]:
    """Lower-cased names the adapter deletes from ``headers`` for this plan."""
    return {n.lower() for n in apply_header_changes(dict(headers), turn)}


def outgoing(turn: Turn, headers) -> dict[str, str]:
    """The request headers as the adapter sends them (mitm._apply: delete, then set)."""
    out = {k.lower(): v for k, v in headers if k.lower() not in removed(turn, headers)}
    out.update(turn.set_headers)
    return out


# ---------------------------------------------------------------- outcomes


def test_not_a_provider_call_is_none(rules):
    assert plan(rules, b"{}", host="example.com", path="/v1/messages") is None
    assert plan(rules, b"", path="/api/claude_code/settings") is None
    assert plan_request(rules, method="GET", host="api.anthropic.com", port=443, path="/v1/messages", headers=[],
                        body=b"", env=ENV) is None


def test_no_route_matched_passes_through_untouched(rules):
    body = ant_body("opus-unrouted")
    t = plan(rules, body)
    assert (t.action, t.outcome) == ("pass", "pass_through")
    assert t.url is None and t.body is None and t.local is None
    assert not t.set_headers and t.keep_headers is None
    assert t.requested_model == "opus-unrouted" and t.original_body == body
    assert t.events == [("routed", {"decision": "pass", "reason": "no route matched"})]
    assert t.request_id.startswith("tk-")


def test_translate_anthropic_to_openai(rules):
    body = ant_body(stream=True, thinking={"type": "adaptive"}, metadata={"user_id": "u-1"})
    t = plan(rules, body)
    assert (t.action, t.outcome) == ("translate", "translated")
    assert (t.client_protocol, t.target_protocol, t.endpoint.name) == ("anthropic", "openai", "local")
    assert t.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert t.stream is True
    sent = json.loads(t.body)
    assert sent["model"] == "claude-haiku-4-5" and sent["messages"] == [{"role": "user", "content": "hi"}]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert "thinking" not in sent and "metadata" not in sent
    assert t.original_body == body  # the client's bytes kept for mitmweb / the ledger
    kinds = [k for k, _ in t.events]
    assert kinds == ["routed", "left_behind", "protocol_translated"]
    # names only: what stayed behind is recorded, never its value
    assert dict(t.events)["left_behind"]["headers"] == ["X-Api-Key", "Anthropic-Version", "anthropic-beta", "Cookie"]
    tr = dict(t.events)["protocol_translated"]
    assert tr["from"] == "anthropic" and tr["to"] == "openai"
    assert tr["dropped"] == ["thinking", "metadata.user_id"]
    assert t.set_headers["accept"] == "text/event-stream" and t.set_headers["accept-encoding"] == "identity"


def test_translate_openai_to_anthropic_adds_version_header(rules):
    t = plan_oai(rules, {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]})
    assert (t.action, t.client_protocol, t.target_protocol) == ("translate", "openai", "anthropic")
    assert t.url == "https://llm.example.com/v1/messages"
    assert t.set_headers["anthropic-version"] == "2023-06-01"
    assert t.set_headers["x-api-key"] == REMOTE_KEY
    tr = dict(t.events)["protocol_translated"]
    assert "header anthropic-version: 2023-06-01" in tr["plumbing"]


def test_retarget_changes_only_the_model_bytes(rules):
    body = b'{"model" : "far-away",\n "max_tokens":64,"messages":[{"role":"user","content":"x \\"model\\": y"}]}'
    t = plan(rules, body, path="/v1/messages?beta=true")
    assert (t.action, t.outcome) == ("retarget", "retargeted")
    assert t.url == "https://llm.example.com/v1/messages?beta=true"  # the client's query string kept
    assert t.model_used == "far-model"
    assert t.body == body.replace(b'"far-away"', b'"far-model"')
    assert t.translation is None and "protocol_translated" not in dict(t.events)


def test_retarget_without_a_model_override_keeps_the_body(rules):
    t = plan_oai(rules, {"model": "far-oai", "messages": [{"role": "user", "content": "hi"}]})
    assert (t.action, t.target_protocol) == ("retarget", "openai")
    assert t.body is None  # not re-serialised: the client's bytes go out as they are
    assert t.url == "https://oai.example.net/v1/chat/completions"


def test_untranslatable_request_is_answered_in_the_clients_protocol(rules):
    """An openai turn without max_tokens cannot become an Anthropic request (the endpoint
    configures no default): a 400 in the client's protocol, nothing sent, nothing invented."""
    body = json.dumps({"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}).encode()
    t = plan(rules, body, host="api.openai.com", path="/v1/chat/completions", headers=OAI_HEADERS)
    assert (t.action, t.outcome) == ("respond", "error")
    assert t.url is None and t.body is None
    assert t.local.status == 400
    err = json.loads(t.local.body)["error"]
    assert err["type"] == "invalid_request_error" and "max_tokens" in err["message"]
    assert [k for k, _ in t.events] == ["routed", "translation_error"]


def test_not_json_body_passes_with_a_routed_event(rules):
    t = plan(rules, b"this is { not json")
    assert (t.action, t.outcome) == ("pass", "pass_through")
    assert t.decision is None and t.body is None and t.url is None
    (kind, data), = t.events
    assert kind == "routed" and data["decision"] == "pass" and "not routable" in data["reason"]
    t = plan(rules, b"[1, 2]")  # JSON, but not an object
    assert t.action == "pass" and "JSON object" in t.events[0][1]["reason"]


# ---------------------------------------------------------------- credentials (docs/dev/architecture.md rule 7)


def test_translation_strips_client_credentials_and_protocol_headers(rules):
    t = plan(rules, ant_body())
    assert removed(t, ANT_HEADERS) == {"x-api-key", "cookie", "anthropic-version", "anthropic-beta"}
    out = outgoing(t, ANT_HEADERS)
    assert out["authorization"] == f"Bearer {LOCAL_KEY}"
    assert "x-api-key" not in out and "cookie" not in out
    assert not any(k.startswith("anthropic-") for k in out)
    assert CLIENT_KEY not in repr(out) and "SECRET-cookie" not in repr(out)
    assert out["user-agent"] == "claude-cli/2.0"  # allow-listed headers stay


def test_translation_to_openai_strips_openai_org_headers(rules):
    t = plan_oai(rules, {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]})
    out = outgoing(t, OAI_HEADERS)
    assert out["x-api-key"] == REMOTE_KEY
    assert "authorization" not in out and "openai-organization" not in out


def test_cross_host_retarget_swaps_the_key_and_keeps_protocol_headers(rules):
    t = plan(rules, ant_body("far-x"))
    assert {"x-api-key", "cookie"} <= removed(t, ANT_HEADERS)
    out = outgoing(t, ANT_HEADERS)
    assert out["x-api-key"] == REMOTE_KEY and "cookie" not in out
    # same protocol: anthropic-version / anthropic-beta are the protocol, not credentials
    assert out["anthropic-version"] == "2023-06-01" and out["anthropic-beta"].startswith("fine-grained")


def test_cross_host_retarget_openai_swaps_bearer(rules):
    t = plan_oai(rules, {"model": "far-oai", "messages": []})
    out = outgoing(t, OAI_HEADERS)
    assert out["authorization"] == f"Bearer {REMOTE_KEY}" and "openai-organization" not in out


def test_same_host_retarget_keeps_the_clients_key(rules):
    t = plan(rules, ant_body("near-x"))
    assert t.action == "retarget" and t.url == "https://api.anthropic.com/v1/messages"
    assert t.keep_headers is None and not t.set_headers  # endpoint's key_env unused: same host
    out = outgoing(t, ANT_HEADERS)
    assert out["x-api-key"] == CLIENT_KEY and out["cookie"] == "session=SECRET-cookie"
    assert json.loads(t.body)["model"] == "near-model"


def test_no_key_env_means_no_auth_header(rules):
    t = plan(rules, ant_body("nokey-1"))
    assert t.endpoint.name == "nokey" and t.action == "translate"
    out = outgoing(t, ANT_HEADERS)
    assert not (set(out) & CREDENTIAL_HEADERS)


def test_key_env_set_but_missing_from_env_means_no_auth_header(rules):
    t = plan(rules, ant_body(), env={})
    assert not (set(outgoing(t, ANT_HEADERS)) & CREDENTIAL_HEADERS)


@pytest.mark.parametrize("model", ["claude-1", "far-1", "near-1", "nokey-1", "gem-1", "strict-1", "hdr-1", "x-1"])
def test_keys_never_in_events_summary_or_trace(rules, model):
    t = plan(rules, ant_body(model), headers=ANT_HEADERS + [("authorization", f"Bearer {CLIENT_KEY}")])
    seen = repr(t.events) + t.summary() + repr(t.decision.trace if t.decision else None) + repr(t.local)
    for secret in (CLIENT_KEY, LOCAL_KEY, REMOTE_KEY, ENV["ANTHROPIC_API_KEY"], "SECRET-cookie"):
        assert secret not in seen


# ---------------------------------------------------------------- refusals


def test_anthropic_to_gemini_translates_to_the_model_path(rules):
    t = plan(rules, ant_body("gem-flash"))
    assert (t.action, t.endpoint.name) == ("translate", "gem")
    assert t.url == "http://127.0.0.1:8002/v1beta/models/gem-flash:generateContent"
    assert json.loads(t.body) == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                                  "generationConfig": {"maxOutputTokens": 64}}
    t = plan(rules, ant_body("gem-flash", stream=True))
    assert t.url == "http://127.0.0.1:8002/v1beta/models/gem-flash:streamGenerateContent?alt=sse"


def test_gemini_target_refuses_a_turn_it_cannot_carry_and_is_skipped(rules):
    t = plan(rules, orphan_result_body("gem-flash"))
    assert (t.action, t.endpoint.name) == ("translate", "local")  # the next matching route served it
    refused = [d for k, d in t.events if k == "route_refused"]
    assert [(d["rule"], d["target"]) for d in refused] == [("to-gemini", "gem")]
    assert ORPHAN_REFUSAL in refused[0]["reason"]
    assert [k for k, _ in t.events] == ["route_refused", "routed", "left_behind", "protocol_translated"]


def test_refused_with_on_refused_error_answers_400(rules):
    t = plan(rules, orphan_result_body("strict-1"))
    assert (t.action, t.outcome) == ("respond", "refused")
    assert t.url is None and t.body is None
    assert t.local.status == 400
    err = json.loads(t.local.body)
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert "Gemini" in err["error"]["message"]
    assert t.local.headers[REQUEST_ID_HEADER] == t.request_id


def test_openai_tool_ids_invalid_for_anthropic_are_refused(rules):
    msgs = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call:abc/1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call:abc/1", "content": "22C"}]
    t = plan_oai(rules, {"model": "gpt-4.1", "messages": msgs})
    assert (t.action, t.outcome) == ("pass", "pass_through")  # refused, no other route: passes untouched
    (ev,) = [d for k, d in t.events if k == "route_refused"]
    assert ev["rule"] == "to-anthropic" and "call:abc/1" in ev["reason"]
    # valid ids: translated, ids byte for byte
    for m in msgs[1:]:
        if "tool_calls" in m:
            m["tool_calls"][0]["id"] = "call_abc-1"
        else:
            m["tool_call_id"] = "call_abc-1"
    t = plan_oai(rules, {"model": "gpt-4.1", "messages": msgs})
    assert t.action == "translate" and b'"call_abc-1"' in t.body


def test_count_tokens_to_openai_endpoint_is_answered_400(rules):
    body = json.dumps({"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hi"}]}).encode()
    t = plan(rules, body, path="/v1/messages/count_tokens?beta=true")
    assert (t.action, t.outcome) == ("respond", "refused")
    assert t.url is None and t.body is None  # nothing sent anywhere, nothing estimated
    assert t.local.status == 400
    err = json.loads(t.local.body)
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert "does not estimate" in err["error"]["message"]
    assert [k for k, _ in t.events] == ["route_refused"]


def test_unreachable_endpoint_is_skipped(rules):
    t = plan(rules, orphan_result_body("gem-1"), reachable=lambda ep: ep.name != "local")
    assert t.action == "pass"
    kinds = [k for k, _ in t.events]
    assert kinds == ["route_refused", "endpoint_unreachable", "routed"]
    assert dict(t.events)["endpoint_unreachable"]["endpoint"] == "local"


# ---------------------------------------------------------------- replace_top_level_model


@pytest.mark.parametrize("body,expected", [
    (b'{"model":"a","x":1}', b'{"model":"NEW","x":1}'),
    (b'{ "model"\t:\r\n  "a" , "x":1}', b'{ "model"\t:\r\n  "NEW" , "x":1}'),
    (b'{"messages":[{"model":"inner"}],"tool":{"input":{"model":"deep"}},"model":"a"}',
     b'{"messages":[{"model":"inner"}],"tool":{"input":{"model":"deep"}},"model":"NEW"}'),
    (b'{"k":"he said \\"model\\": \\"x\\"","model":"a\\"b\\\\"}', b'{"k":"he said \\"model\\": \\"x\\"","model":"NEW"}'),
    (b'{"model\\"":"nope","model":"a"}', b'{"model\\"":"nope","model":"NEW"}'),
    (b'{"x":"model","model":"a"}', b'{"x":"model","model":"NEW"}'),
    (b'{\n  "model": "\\u00e9t\\u00e9"\n}', b'{\n  "model": "NEW"\n}'),
])
def test_replace_top_level_model_examples(body, expected):
    assert replace_top_level_model(body, "NEW") == expected


@pytest.mark.parametrize("body", [
    b'{"messages":[{"model":"inner"}]}', b'{"x":{"model":"a"}}', b'[{"model":"a"}]', b'{"model":null}',
    b'{"model":5}', b'{"k":"\\"model\\":\\"a\\""}', b"", b"{}",
])
def test_replace_top_level_model_none_without_a_top_level_string_model(body):
    assert replace_top_level_model(body, "NEW") is None


def test_replace_top_level_model_encodes_the_new_value():
    out = replace_top_level_model(b'{"model":"a"}', 'we"ird\\ mödel\n')
    assert json.loads(out) == {"model": 'we"ird\\ mödel\n'}


SENTINEL = "\u2603SENTINEL\u2603"  # "☃" never appears in generated text (alphabet below)
KEY = st.sampled_from(["model", "Model", "models", "x", "messages", "input", "mo\"del", "model\\"])
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\u2603"), max_size=10)
WORDISH = st.sampled_from(["model", '"model":', "\\", '"', "{", "}", "[", "]", ":", ","]) | TEXT
SCALAR = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | WORDISH
NESTED = st.recursive(SCALAR, lambda c: st.lists(c, max_size=3) | st.dictionaries(KEY | TEXT, c, max_size=3),
                      max_leaves=10)
STYLES = [dict(), dict(separators=(",", ":")), dict(indent=2), dict(indent="\t"), dict(separators=(" , ", " : ")),
          dict(indent=1, separators=(",", " :  "))]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.dictionaries(KEY.filter(lambda k: k != "model") | TEXT.filter(lambda k: k != "model"), NESTED, max_size=4),
       after=st.dictionaries(KEY.filter(lambda k: k != "model") | TEXT.filter(lambda k: k != "model"), NESTED, max_size=4),
       old=TEXT, new=TEXT, style=st.sampled_from(STYLES), ascii_=st.booleans())
def test_replace_top_level_model_changes_only_the_model_value(before, after, old, new, style, ascii_):
    """Whatever the surrounding JSON (nested "model" keys, escapes, whitespace), the bytes
    before and after the top-level model's value are identical and the value is the new one."""
    after = {k: v for k, v in after.items() if k not in before}
    doc = {**before, "model": SENTINEL, **after}
    template = json.dumps(doc, ensure_ascii=ascii_, **style)
    marker = json.dumps(SENTINEL, ensure_ascii=ascii_)
    assert template.count(marker) == 1
    head, tail = (p.encode() for p in template.split(marker))
    body = head + json.dumps(old, ensure_ascii=ascii_).encode() + tail
    out = replace_top_level_model(body, new)
    assert out is not None
    assert out.startswith(head) and out.endswith(tail)
    assert json.loads(out[len(head):len(out) - len(tail)]) == new
    assert json.loads(out) == {**before, "model": new, **after}


# ---------------------------------------------------------------- reply side


@pytest.mark.parametrize("model,status,ctype,mode", [
    ("claude-1", 200, "text/event-stream", "translate-stream"),
    ("claude-1", 200, "Text/Event-Stream; charset=utf-8", "translate-stream"),
    ("claude-1", 200, "application/json", "translate-whole"),
    ("claude-1", 200, "", "translate-whole"),
    ("claude-1", 429, "text/event-stream", "translate-whole"),  # an error is never streamed through
    ("claude-1", 500, "application/json", "translate-whole"),
    ("far-1", 200, "text/event-stream", "raw-stream"),  # retarget: bytes unchanged
    ("far-1", 200, "application/json", "leave"),
    ("far-1", 500, "text/event-stream; charset=utf-8", "raw-stream"),
    ("opus-x", 200, "text/event-stream", "raw-stream"),  # pass-through
    ("opus-x", 200, "application/json", "leave"),
    ("strict-1", 400, "application/json", "leave"),  # answered locally
])
def test_response_mode_table(rules, model, status, ctype, mode):
    body = orphan_result_body(model) if model == "strict-1" else ant_body(model)
    assert response_mode(plan(rules, body), status, ctype) == mode


@pytest.mark.parametrize("protocol", ["openai", "openai-responses"])
def test_client_error_openai_envelope(protocol):
    r = LocalResponse.error(protocol, 429, "slow down", request_id="tk-1")
    assert r.status == 429 and r.headers == {"content-type": "application/json", REQUEST_ID_HEADER: "tk-1"}
    assert json.loads(r.body) == {"error": {"message": "slow down", "type": "rate_limit_error", "param": None,
                                            "code": "rate_limit_exceeded"}}
    r = LocalResponse.error(protocol, 500, "boom", "api_error")  # Anthropic vocabulary: OpenAI clients go by status
    assert json.loads(r.body)["error"]["type"] == "server_error" and REQUEST_ID_HEADER not in r.headers


def test_client_error_anthropic_envelope():
    r = LocalResponse.error("anthropic", 500, "tokunseba internal error: x", "api_error", request_id="tk-2")
    assert r.status == 500 and r.headers[REQUEST_ID_HEADER] == "tk-2"
    assert json.loads(r.body) == {"type": "error", "error": {"type": "api_error", "message": "tokunseba internal error: x"}}
    assert json.loads(LocalResponse.error("anthropic", 400, "bad").body)["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("status,gstatus", [(400, "INVALID_ARGUMENT"), (429, "RESOURCE_EXHAUSTED"), (502, "UNAVAILABLE"),
                                            (418, "UNKNOWN")])
def test_client_error_gemini_envelope(status, gstatus):
    r = LocalResponse.error("gemini", status, "nope", request_id="tk-3")
    assert r.status == status and r.headers[REQUEST_ID_HEADER] == "tk-3"
    assert json.loads(r.body) == {"error": {"code": status, "message": "nope", "status": gstatus}}


def test_turn_client_error_uses_its_protocol_and_request_id(rules):
    t = plan_oai(rules, {"model": "gpt-4.1", "messages": []})
    r = t.client_error(502, "relay down")
    assert r.headers[REQUEST_ID_HEADER] == t.request_id and json.loads(r.body)["error"]["message"] == "relay down"


# ---------------------------------------------------------------- summary (mitmweb comment)


def test_summary_of_a_translated_turn(rules):
    t = plan(rules, ant_body(thinking={"type": "adaptive"}, metadata={"user_id": "u-1"}))
    assert t.summary() == "easy-turns → local · anthropic→openai · dropped: thinking, metadata.user_id"


def test_summary_without_drops_and_for_other_outcomes(rules):
    assert plan(rules, ant_body()).summary() == "easy-turns → local · anthropic→openai"
    assert plan(rules, ant_body("far-1")).summary() == "cross-retarget → remote-ant · retarget anthropic"
    assert plan(rules, ant_body("opus-x")).summary() == "pass-through (no route matched)"
    s = plan(rules, orphan_result_body("strict-1")).summary()
    assert s.startswith("gemini-or-error → gem · refused: ") and ORPHAN_REFUSAL in s


def test_summary_shortens_many_dropped_paths(rules):
    extra = {f"x_unknown_{i}": i for i in range(10)}
    t = plan(rules, ant_body(**extra))
    assert t.summary().endswith("dropped: " + ", ".join(f"x_unknown_{i}" for i in range(8)) + ", +2 more")


def test_summary_of_a_pass_through_after_a_refusal_says_why(rules):
    rules_only_gemini = load_rules_text(
        "endpoints: {gem: {protocol: gemini, url: 'http://127.0.0.1:9/v1beta'}}\n"
        "routes: [{name: to-gemini, when: {client: anthropic}, to: gem}]\n")
    t = plan(rules_only_gemini, orphan_result_body("claude-1"))
    assert t.action == "pass"
    assert "refused" in t.summary() and "no route matched" not in t.summary()


# ---------------------------------------------------------------- endpoint stop strings (plumbing)

STOP_RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:9/v1
    stop: ["<|im_end|>", "</s>"]
routes:
  - name: all
    to: local
"""


def _stop_turn(body: dict):
    import json as _json

    from tokunseba.routing import load_rules_text

    return plan_request(load_rules_text(STOP_RULES), method="POST", host="api.anthropic.com", port=443,
                        path="/v1/messages", headers=[], body=_json.dumps(body).encode(), env={})


def test_endpoint_stop_strings_are_added_after_the_clients_and_recorded_as_plumbing():
    import json as _json

    t = _stop_turn({"model": "m", "max_tokens": 5, "stop_sequences": ["END"],
                    "messages": [{"role": "user", "content": "hi"}]})
    sent = _json.loads(t.body)
    assert sent["stop"] == ["END", "<|im_end|>", "</s>"]
    assert any("<|im_end|>" in p and "endpoint local" in p for p in t.translation.plumbing)


def test_endpoint_stop_strings_never_push_the_clients_out():
    import json as _json

    t = _stop_turn({"model": "m", "max_tokens": 5, "stop_sequences": ["a", "b", "c"],
                    "messages": [{"role": "user", "content": "hi"}]})
    assert _json.loads(t.body)["stop"] == ["a", "b", "c", "<|im_end|>"]
    assert any("4 stop strings at most" in w for w in t.translation.warnings)


# ---------------------------------------------------------------- refusals found by the translation itself

REFUSAL_RULES = """\
endpoints:
  oai:
    protocol: openai
    url: http://127.0.0.1:9/v1
  ant:
    protocol: anthropic
    url: http://127.0.0.1:8/v1
routes:
  - name: first
    when: {{model: "first-*"}}
    to: {first}
    on_refused: {on_refused}
  - name: second
    when: {{model: "first-*"}}
    to: {second}
"""


def _refusal_turn(client: str, body: dict, first: str, second: str, on_refused: str = "skip"):
    import json as _json

    from tokunseba.routing import load_rules_text

    rules = load_rules_text(REFUSAL_RULES.format(first=first, second=second, on_refused=on_refused))
    host, path = ("api.anthropic.com", "/v1/messages") if client == "anthropic" else ("api.openai.com",
                                                                                        "/v1/chat/completions")
    return plan_request(rules, method="POST", host=host, port=443, path=path, headers=[],
                        body=_json.dumps(body).encode(), env={})


LONG_TOOL = {"name": "mcp__" + "x" * 70, "input_schema": {"type": "object"}}


def test_tool_name_too_long_for_openai_refuses_the_route_and_the_next_one_serves():
    t = _refusal_turn("anthropic", {"model": "first-m", "max_tokens": 5, "tools": [LONG_TOOL],
                                    "messages": [{"role": "user", "content": "hi"}]}, "oai", "anthropic")
    assert t.decision.route.name == "second" and t.outcome == "retargeted"
    assert t.decision.trace[0]["refused"] and "64" in t.decision.trace[0]["refused"]
    assert [k for k, _ in t.events][:1] == ["route_refused"]


def test_tool_name_too_long_with_on_refused_error_answers_400():
    t = _refusal_turn("anthropic", {"model": "first-m", "max_tokens": 5, "tools": [LONG_TOOL],
                                    "messages": [{"role": "user", "content": "hi"}]}, "oai", "anthropic", "error")
    assert t.outcome == "refused" and t.local.status == 400


@pytest.mark.parametrize("bad_id", ["functions.get:0", "call_1\n", "call 1"])
def test_tool_id_anthropic_would_reject_refuses_the_route(bad_id):
    body = {"model": "first-m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": bad_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": bad_id, "content": "ok"}]}
    t = _refusal_turn("openai", body, "ant", "openai")
    assert t.decision.route.name == "second" and t.decision.trace[0]["refused"]


def test_a_turn_is_translated_once_even_when_refusal_checks_ran(monkeypatch):
    import tokunseba.turn.plan as turn_mod

    calls = []
    real = turn_mod.translate.request
    monkeypatch.setattr(turn_mod.translate, "request", lambda *a, **k: calls.append(1) or real(*a, **k))
    t = _refusal_turn("anthropic", {"model": "first-m", "max_tokens": 5,
                                    "messages": [{"role": "user", "content": "hi"}]}, "oai", "anthropic")
    assert t.outcome == "translated" and len(calls) == 1


# ---------------------------------------------------------------- retarget queries (Gemini)


def test_outgoing_query_keeps_the_endpoints_and_only_protocol_params_across_hosts():
    from tokunseba.credentials import outgoing_query

    url = "https://g.example/v1beta/models/m:streamGenerateContent?alt=sse"
    assert outgoing_query(url, "/v1beta/models/x:streamGenerateContent?alt=sse&key=AIzaSECRET&foo=1", "gemini",
                          "gemini", cross_host=True) == (url, ["key", "foo"])
    assert outgoing_query("http://h/v1/messages", "/v1/messages?beta=true&access_token=t", "anthropic", "anthropic",
                          cross_host=True) == ("http://h/v1/messages?beta=true", ["access_token"])
    # another protocol's endpoint: none of the client's parameters mean anything there
    assert outgoing_query("http://h/v1/chat/completions", "/v1/messages?beta=true", "anthropic", "openai",
                          cross_host=True) == ("http://h/v1/chat/completions", ["beta"])
    assert outgoing_query("http://h/v1/x", "/v1/x?key=k", "gemini", "gemini", cross_host=False) == ("http://h/v1/x?key=k", [])


def test_gemini_retarget_never_forwards_the_clients_key_to_another_host():
    from tokunseba.routing import load_rules_text

    rules = load_rules_text("endpoints:\n  g2:\n    protocol: gemini\n    url: https://gemini-proxy.example/v1beta\n"
                            "    key_env: G2_KEY\nroutes:\n  - name: g\n    to: g2\n    model: gemini-other\n")
    t = plan_request(rules, method="POST", host="generativelanguage.googleapis.com", port=443,
                     path="/v1beta/models/gemini-x:streamGenerateContent?alt=sse&key=AIzaCLIENT", headers=[],
                     body=b'{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}', env={"G2_KEY": "k2"})
    assert t.outcome == "retargeted"
    assert "AIzaCLIENT" not in t.url and t.url.count("alt=sse") == 1 and "models/gemini-other:" in t.url
    assert t.set_headers.get("x-goog-api-key") == "k2" and t.body is None


# ---------------------------------------------------------------- decide, then translate (issue 23)


def _long_tool_prep(first: str, second: str, on_refused: str = "skip"):
    from tokunseba.routing import load_rules_text
    from tokunseba.turn.plan import prepare_request

    rules = load_rules_text(REFUSAL_RULES.format(first=first, second=second, on_refused=on_refused))
    body = json.dumps({"model": "first-m", "max_tokens": 5, "tools": [LONG_TOOL],
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    prep = prepare_request(method="POST", host="api.anthropic.com", port=443, path="/v1/messages", headers=[],
                           body=body)
    return rules, prep


def test_the_plan_carries_the_one_translation_of_the_route_chosen(monkeypatch):
    from tokunseba.turn import plan as turn_mod
    from tokunseba.routing import load_rules_text
    from tokunseba.turn.plan import Plan, build_turn, decide_request, prepare_request

    calls = []
    real = turn_mod.translate_for_endpoint
    monkeypatch.setattr(turn_mod, "translate_for_endpoint", lambda *a, **k: calls.append(a[1].name) or real(*a, **k))
    rules = load_rules_text(REFUSAL_RULES.format(first="oai", second="ant", on_refused="skip"))
    body = json.dumps({"model": "first-m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode()
    prep = prepare_request(method="POST", host="api.anthropic.com", port=443, path="/v1/messages", headers=[],
                           body=body)
    p = decide_request(rules, prep)
    assert isinstance(p, Plan) and p.decision.endpoint.name == "oai" and p.translation is not None
    assert calls == ["oai"] and not hasattr(prep, "translations")  # translated once; no memo on the request
    t = build_turn(rules, prep, p, env={})
    assert t.action == "translate" and t.translation is p.translation and calls == ["oai"]


def test_a_refusing_translation_moves_the_decision_on_and_says_so_as_decide_would():
    from tokunseba.turn.plan import decide_request

    rules, prep = _long_tool_prep("oai", "oai")
    p = decide_request(rules, prep)
    d = p.decision
    assert d.action == "pass" and d.route is None and p.translation is None
    assert [t["route"] for t in d.trace] == ["first", "second"] and all(t["refused"] for t in d.trace)
    why = d.trace[0]["refused"]
    assert d.reason == f"no usable route: first refused ({why}); second refused ({why})"
    rules, prep = _long_tool_prep("oai", "oai", on_refused="error")
    d = decide_request(rules, prep).decision
    assert (d.action, d.route.name, d.reason) == ("error", "first", f"route first refused: {why}")
    assert [t["route"] for t in d.trace] == ["first"]


def test_a_route_refused_then_an_unreachable_one_are_both_in_the_reason():
    from tokunseba.turn.plan import decide_request

    rules, prep = _long_tool_prep("oai", "ant")
    d = decide_request(rules, prep, lambda ep: ep.name != "ant").decision
    assert d.action == "pass" and d.trace[1]["unreachable"]
    assert d.reason.startswith("no usable route: first refused (") and d.reason.endswith("; second: endpoint ant unreachable")


def test_a_refusing_route_whose_endpoint_is_down_is_skipped_as_refused_even_with_on_failure_error():
    from tokunseba.routing import load_rules_text
    from tokunseba.turn.plan import decide_request

    text = REFUSAL_RULES.format(first="oai", second="ant", on_refused="skip").replace(
        "    on_refused: skip\n", "    on_refused: skip\n    on_failure: error\n")
    rules = load_rules_text(text)
    _, prep = _long_tool_prep("oai", "ant")
    p = decide_request(rules, prep, lambda ep: ep.name != "oai")
    d = p.decision
    assert (d.action, d.route.name) == ("route", "second")  # first would refuse the turn: its failure is not the client's
    assert d.trace[0]["refused"] and d.trace[0]["unreachable"] is False and "unavailable" not in d.trace[0]
    # a route that would take the turn still answers its unavailability as on_failure: error says
    body = json.dumps({"model": "first-m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode()
    from tokunseba.turn.plan import prepare_request

    prep = prepare_request(method="POST", host="api.anthropic.com", port=443, path="/v1/messages", headers=[],
                           body=body)
    d = decide_request(rules, prep, lambda ep: ep.name != "oai").decision
    assert (d.action, d.route.name) == ("error", "first") and d.trace[0]["unreachable"]
