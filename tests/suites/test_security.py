"""Issue 8 (security), without a proxy process: what leaves for another host (an allow-list),
redaction by value, fail-closed rules (unmatched: refuse, on_unreachable: error), refusal
of what the client's protocol forbids, loopback-only routing, private files, `run`'s guards.
The end-to-end side (canary through a real mitmdump) is tests/e2e/test_security_e2e.py."""

from __future__ import annotations

import json
import logging
import os
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokunseba.cli.main import main as cli_main
from tokunseba.ledger import Ledger
from tokunseba.routing import RulesError, load_rules, load_rules_text
from tokunseba.credentials import (KNOWN_SECRETS, REDACTED, RedactingFilter, StreamRedactor, is_credential_header,
                               redact_query, scrub)
from tokunseba.turn.plan import apply_header_changes
from tokunseba.protocols import REGISTRY
from tokunseba.validate import first_problem

from tests.support.planning import plan_request

from tests.proxy.test_mitm import EP_KEY, addon, endpoint_port, make_flow, rules_file  # noqa: F401 - fixtures

CANARY = "CANARY-7f3a9c1e5d"
EP = "sk-endpoint-key-SECRET-42"
# every credential-ish header a client or a gateway SDK may send
CANARY_HEADERS = [
    ("x-api-key", CANARY), ("authorization", f"Bearer {CANARY}"), ("cookie", f"session={CANARY}"),
    ("cf-aig-authorization", f"Bearer {CANARY}"), ("helicone-auth", f"Bearer {CANARY}"),
    ("x-portkey-api-key", CANARY), ("x-auth-token", CANARY), ("x-acme-token", CANARY),
    ("openai-organization", CANARY), ("x-goog-api-key", CANARY), ("proxy-authorization", f"Basic {CANARY}"),
]
PROTOCOL_HEADERS = [("anthropic-version", "2023-06-01"), ("anthropic-beta", "tools-2024"),
                    ("content-type", "application/json"), ("user-agent", "claude-cli/2.0"), ("host", "x")]
CANARY_QUERY = f"key={CANARY}&api_key={CANARY}&access_token={CANARY}&token={CANARY}"

RULES = """\
endpoints:
  far-ant:
    protocol: anthropic
    url: https://llm.example.com/v1
    key_env: EP_KEY
  local:
    protocol: openai
    url: http://127.0.0.1:8000/v1
    key_env: EP_KEY
  g2:
    protocol: gemini
    url: https://gemini-proxy.example/v1beta
    key_env: EP_KEY
routes:
  - name: retarget
    when: {client: anthropic, model: "far-*"}
    to: far-ant
  - name: chat-to-ant
    when: {client: openai, model: "gpt-*"}
    to: far-ant
  - name: to-local
    when: {client: [anthropic, openai, openai-responses], model: ["claude-*", "gpt-*"]}
    to: local
  - name: gem
    when: {client: gemini}
    to: g2
"""
ENV = {"EP_KEY": EP}


@pytest.fixture(scope="module")
def rules():
    return load_rules_text(RULES, "sec.yaml")


def plan(rules, body: dict | bytes, *, host="api.anthropic.com", path="/v1/messages", headers=(), **kw):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return plan_request(rules, method="POST", host=host, port=443, path=path, headers=list(headers), body=raw,
                        env=ENV, **kw)


def outgoing(turn, headers) -> dict[str, str]:
    gone = {n.lower() for n in apply_header_changes(dict(headers), turn)}
    out = {k.lower(): v for k, v in headers if k.lower() not in gone}
    out.update(turn.set_headers)
    return out


def ant(model="claude-haiku", **extra) -> dict:
    return {"model": model, "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}], **extra}


# ---------------------------------------------------------------- item 2: an allow-list for other hosts


@pytest.mark.parametrize("model,kind", [("claude-haiku", "translate"), ("far-1", "retarget")])
def test_no_client_credential_reaches_another_host(rules, model, kind):
    headers = CANARY_HEADERS + PROTOCOL_HEADERS
    t = plan(rules, ant(model), path=f"/v1/messages?beta=true&{CANARY_QUERY}", headers=headers)
    assert t.action == kind
    out = outgoing(t, headers)
    assert CANARY not in repr(out) and CANARY not in t.url
    assert EP in (out.get("authorization", "") + out.get("x-api-key", ""))  # the endpoint's own key
    assert out["user-agent"] == "claude-cli/2.0" and out["content-type"] == "application/json"
    left = dict(t.events)["left_behind"]
    assert {"x-api-key", "cookie", "cf-aig-authorization", "helicone-auth", "x-portkey-api-key", "x-auth-token",
            "x-acme-token"} <= set(left["headers"])
    assert {"key", "api_key", "access_token", "token"} <= set(left["query"])
    assert CANARY not in repr(t.events) and EP not in repr(t.events)  # names only
    if kind == "retarget":  # same protocol: its own version/beta headers and ?beta go on
        assert out["anthropic-version"] == "2023-06-01" and out["anthropic-beta"] == "tools-2024"
        assert t.url == "https://llm.example.com/v1/messages?beta=true"
    else:
        assert not any(k.startswith("anthropic-") for k in out) and "?" not in t.url


def test_gemini_retarget_carries_no_anthropic_headers_and_no_client_query(rules):
    headers = CANARY_HEADERS + PROTOCOL_HEADERS
    t = plan(rules, {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
             host="generativelanguage.googleapis.com",
             path=f"/v1beta/models/gemini-x:streamGenerateContent?alt=sse&{CANARY_QUERY}", headers=headers)
    assert t.action == "retarget"
    out = outgoing(t, headers)
    assert not any(k.startswith("anthropic-") for k in out)
    assert out["x-goog-api-key"] == EP and CANARY not in repr(out)
    assert t.url == "https://gemini-proxy.example/v1beta/models/gemini-x:streamGenerateContent?alt=sse"


def test_credential_names():
    for name in ("Authorization", "cf-aig-authorization", "helicone-auth", "x-portkey-api-key", "x-auth-token",
                 "X-Acme-Token", "cookie", "api_key", "x-goog-api-key"):
        assert is_credential_header(name), name
    for name in ("content-type", "accept", "user-agent", "anthropic-version", "host"):
        assert not is_credential_header(name), name


def test_every_endpoint_key_header_is_a_credential_in_the_one_list():
    """The header carrying an endpoint's key (each protocol's ``auth_header`` fact) is
    named by credentials.py's list itself, not only by a name pattern: the allow-list keeps it
    from other hosts, and the ledger, logs and mitmweb redact it."""
    from tokunseba.credentials import ALLOWED_HEADERS, CREDENTIAL_NAMES

    for p in REGISTRY.values():
        name = p.auth_header[0]
        assert name in CREDENTIAL_NAMES and is_credential_header(name), p.name
        assert scrub({"headers": {name: CANARY}}) == {"headers": {name: REDACTED}}
    allowed = set(ALLOWED_HEADERS).union(*(p.version_headers for p in REGISTRY.values()))
    assert not {n for n in allowed if is_credential_header(n)}  # no credential is allow-listed


# ---------------------------------------------------------------- item 3: redaction by value


@pytest.fixture
def known_key():
    KNOWN_SECRETS.set([EP])
    yield EP
    KNOWN_SECRETS.set([])


def test_scrub_redacts_a_known_key_whatever_its_shape(known_key):
    msg = f"invalid key {known_key[::-1]}; you sent {known_key}"
    assert scrub({"message": msg}) == {"message": f"invalid key {known_key[::-1]}; you sent {REDACTED}"}
    assert redact_query(f"/v1/x?key={CANARY}&alt=sse") == f"/v1/x?key={REDACTED}&alt=sse"


@pytest.mark.parametrize("echo", [f"x-auth-token: {CANARY}", f'"x-acme-token": "{CANARY}"', f"X-Portkey-Api-Key={CANARY}",
                                  f"helicone-auth: Bearer {CANARY}", f"cookie: a={CANARY}"])
def test_echoed_gateway_credentials_are_scrubbed_from_ledger_text(echo):
    out = scrub({"message": f"upstream says: {echo}\nmax_tokens: 5"})["message"]
    assert CANARY not in out and REDACTED in out and out.endswith("\nmax_tokens: 5")  # ordinary text stays


def test_log_filter_redacts_keys_in_messages_and_arguments(known_key, caplog):
    logger = logging.getLogger("tokunseba.test-redaction")
    logger.addFilter(RedactingFilter())
    with caplog.at_level(logging.INFO, logger="tokunseba.test-redaction"):
        logger.info("upstream said: %s", f"bad key {known_key} at /v1?api_key={CANARY}")
    assert known_key not in caplog.text and CANARY not in caplog.text and REDACTED in caplog.text


def test_the_addons_loggers_redact(known_key, caplog):
    import tokunseba.proxy.mitm  # noqa: F401 - installs the filters

    with caplog.at_level(logging.INFO):
        for name in ("tokunseba", "tokunseba.ledger", "tokunseba.relay"):
            logging.getLogger(name).warning("relay: upstream said %s", known_key)
    assert known_key not in caplog.text and caplog.text.count(REDACTED) == 3


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 80), max_size=6), st.sampled_from(["", "x", "sk-endpoint", "sk-endpoint-key-SECRET-4"]))
def test_stream_redaction_does_not_depend_on_the_split(cuts, noise):
    data = f'data: {{"error":"{noise}bad key {EP}; {EP[:9]} {noise}"}}\n\n{EP}'.encode()
    want = data.replace(EP.encode(), REDACTED.encode())
    r = StreamRedactor([EP])
    pos, out = 0, b""
    for c in sorted(set(cuts)):
        out += r.feed(data[pos:c])
        pos = max(pos, c)
    out += r.feed(data[pos:]) + r.close()
    assert out == want


def test_stream_redaction_holds_back_only_a_possible_key_start():
    r = StreamRedactor([EP])
    assert r.feed(b"hello sk-end") == b"hello "
    assert r.feed(b"ing") == b"sk-ending"


# ---------------------------------------------------------------- item 5: fail closed when the rules say so

REFUSE = RULES.replace("routes:\n", "unmatched: refuse\nroutes:\n").replace(
    "    to: local\n", "    to: local\n    on_unreachable: error\n")


@pytest.mark.parametrize("raw", [b"this is { not json", b"", b"\xff\xfe{}", b"[" * 5000 + b"]" * 5000, b"[1]"],
                         ids=["invalid-json", "empty", "invalid-utf8", "too-deep", "not-an-object"])
def test_unmatched_refuse_answers_an_unparseable_body_in_the_clients_protocol(raw):
    t = plan(load_rules_text(REFUSE), raw)
    assert (t.action, t.outcome) == ("respond", "refused") and t.url is None
    err = json.loads(t.local.body)
    assert t.local.status == 400 and err["type"] == "error" and "unmatched: refuse" in err["error"]["message"]
    assert [k for k, _ in t.events] == ["routed", "unmatched_refused"]


def test_unmatched_refuse_answers_a_turn_no_route_takes_openai_envelope():
    t = plan(load_rules_text(REFUSE), {"model": "o3", "messages": [{"role": "user", "content": "hi"}]},
             host="api.openai.com", path="/v1/chat/completions")
    assert t.outcome == "refused" and t.local.status == 400
    assert "unmatched: refuse" in json.loads(t.local.body)["error"]["message"]


def test_unmatched_pass_is_the_default(rules):
    t = plan(rules, b"not json")
    assert t.action == "pass" and t.local is None


def test_on_unreachable_error_answers_instead_of_falling_back():
    t = plan(load_rules_text(REFUSE), ant(), reachable=lambda ep: False)
    assert (t.action, t.outcome) == ("respond", "error") and t.local.status == 503
    assert "unreachable" in json.loads(t.local.body)["error"]["message"]
    assert "endpoint_unreachable" in [k for k, _ in t.events]
    # default skip: the next route, and finally the original host (today's behaviour, recorded)
    t = plan(load_rules_text(RULES), ant(), reachable=lambda ep: False)
    assert t.action == "pass" and "endpoint_unreachable" in [k for k, _ in t.events]


@pytest.mark.parametrize("text,line,what", [
    ("unmatched: drop\n", 1, "the rules file: unmatched must be one of: pass, refuse; got 'drop'"),
    ("endpoints:\n  l:\n    protocol: openai\n    url: http://127.0.0.1:1/v1\nroutes:\n  - name: r\n    to: l\n"
     "    on_unreachable: fallback\n", 8, "route 'r': on_unreachable must be one of: skip, error; got 'fallback'"),
])
def test_new_keys_are_validated_with_file_and_line(tmp_path, text, line, what):
    p = tmp_path / "r.yaml"
    p.write_text(text)
    with pytest.raises(RulesError) as ei:
        load_rules(p)
    assert str(ei.value) == f"{p}:{line}: {what}"


def test_all_local_example_fails_closed():
    from pathlib import Path

    rules = load_rules(Path(__file__).resolve().parents[2] / "rules" / "examples" / "all-local.yaml")
    assert rules.unmatched == "refuse" and [r.on_unreachable for r in rules.routes] == ["error"]


# ---------------------------------------------------------------- item 6: what the client's protocol forbids

TOOL_USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]}


@pytest.mark.parametrize("client,body,path", [
    ("anthropic", ant(max_tokens=-1), "max_tokens"),
    ("anthropic", ant(messages=[]), "messages"),
    ("anthropic", ant(messages=[{"role": "user", "content": "x"}, TOOL_USE, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "r"}]}]), "messages[2].content[0].tool_use_id"),
    ("openai", {"model": "gpt-4.1", "max_tokens": -1, "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
    ("openai", {"model": "gpt-4.1", "messages": []}, "messages"),
    ("openai", {"model": "gpt-4.1", "messages": [{"role": "user", "content": "x"},
                                                  {"role": "tool", "tool_call_id": "call_9", "content": "r"}]},
     "messages[1].tool_call_id"),
    ("openai-responses", {"model": "gpt-5", "max_output_tokens": 0, "input": "x"}, "max_output_tokens"),
    ("openai-responses", {"model": "gpt-5", "input": [{"type": "function_call_output", "call_id": "c1",
                                                       "output": "r"}]}, "input[0].call_id"),
])
def test_translated_turn_refuses_what_its_protocol_forbids_naming_the_path(rules, client, body, path):
    where = {"anthropic": ("api.anthropic.com", "/v1/messages"), "openai": ("api.openai.com", "/v1/chat/completions"),
             "openai-responses": ("api.openai.com", "/v1/responses")}[client]
    t = plan(rules, body, host=where[0], path=where[1])
    assert (t.action, t.outcome) == ("respond", "error") and t.url is None and t.body is None
    assert t.local.status == 400
    err = json.loads(t.local.body)
    message = err["error"]["message"]
    assert f"invalid request: {path}:" in message
    assert dict(t.events)["request_invalid"]["path"] == path


def test_valid_tool_round_trip_and_retargets_are_not_refused(rules):
    ok = ant(messages=[{"role": "user", "content": "x"}, TOOL_USE, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}]}])
    assert first_problem("anthropic", ok) is None
    assert plan(rules, ok).action == "translate"
    assert plan(rules, ant("far-1", max_tokens=-1)).action == "retarget"  # the far end checks for itself
    assert first_problem("openai-responses", {"previous_response_id": "r", "input": [
        {"type": "function_call_output", "call_id": "c1", "output": "r"}]}) is None
    assert all(c.reason for p in REGISTRY.values() for c in p.checks)


# ---------------------------------------------------------------- item 1: loopback only, unless opted in


async def test_non_loopback_client_gets_no_endpoint_key(addon):
    f = make_flow({"model": "claude-haiku-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    f.client_conn.peername = ("192.168.1.77", 50123)
    await addon.request(f)
    assert f.response is not None and f.response.status_code == 403
    body = json.loads(f.response.content)
    assert body["error"]["type"] == "permission_error" and "not on loopback" in body["error"]["message"]
    assert EP_KEY not in repr(list(f.request.headers.items())) and f.request.host == "api.anthropic.com"
    assert addon.flows[f.id].relay_token is None


async def test_non_loopback_client_is_routed_after_opting_in(addon):
    addon.tctx.options.update(tokunseba_allow_remote_clients=True)
    f = make_flow({"model": "claude-haiku-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    f.client_conn.peername = ("192.168.1.77", 50123)
    await addon.request(f)
    assert f.response is None and f.request.headers["authorization"] == f"Bearer {EP_KEY}"


async def test_echoed_endpoint_key_is_redacted_in_a_whole_reply(addon):
    from mitmproxy import http

    f = make_flow({"model": "retarget-x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    await addon.request(f)
    assert f.request.headers["x-api-key"] == EP_KEY
    f.response = http.Response.make(401, json.dumps({"type": "error", "error": {
        "type": "authentication_error", "message": f"invalid x-api-key {EP_KEY}"}}).encode(),
        {"content-type": "application/json"})
    addon.responseheaders(f)
    addon.response(f)
    assert EP_KEY not in f.response.get_text() and REDACTED in f.response.get_text()


# ---------------------------------------------------------------- item 4: private files


def test_run_warns_about_a_ledger_others_can_read(tmp_path, capsys, monkeypatch):
    from tokunseba.cli import run as cli_run

    ledger = tmp_path / "ledger.db"
    Ledger(ledger).close()
    os.chmod(ledger, 0o644)
    warning = cli_run.ledger_warning(str(ledger))
    assert warning.startswith("tokunseba: warning: the ledger is readable by other users:") and "\n" not in warning
    assert cli_main(["run", "--dry-run", "--ledger", str(ledger)]) == 0  # a warning, not a refusal
    assert capsys.readouterr().err == warning + "\n"
    os.chmod(ledger, 0o600)
    assert cli_run.ledger_warning(str(ledger)) is None
    assert cli_main(["run", "--dry-run", "--ledger", str(ledger)]) == 0 and capsys.readouterr().err == ""


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5"])
def test_run_on_a_public_address_without_proxyauth_refuses_to_start(capsys, host):
    assert cli_main(["run", "--dry-run", "--host", host]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "without proxy authentication" in err and "--proxyauth" in err


def test_run_on_a_public_address_with_proxyauth_starts(capsys):
    assert cli_main(["run", "--dry-run", "--host", "0.0.0.0", "--", "--proxyauth", "u:p"]) == 0
    out = capsys.readouterr().out
    assert "--listen-host 0.0.0.0" in out and "--proxyauth u:p" in out
    assert cli_main(["run", "--dry-run", "--host", "localhost"]) == 0


def test_check_shows_the_fail_closed_keys(tmp_path, capsys):
    p = tmp_path / "r.yaml"
    p.write_text(textwrap.dedent(REFUSE))
    assert cli_main(["check", str(p)]) == 0
    out = capsys.readouterr().out
    assert "unmatched: refuse" in out and "on_failure: error for to-local; next for the others" in out


def test_explain_shows_what_was_left_behind(tmp_path, capsys):
    ledger = tmp_path / "l.db"
    with Ledger(ledger) as led:
        led.start_turn("tk-left1", started_at=1.0, client_protocol="anthropic", host="api.anthropic.com",
                       path="/v1/messages", requested_model="claude-x", stream=False)
        led.event("tk-left1", "left_behind", {"headers": ["x-api-key", "cookie"], "query": ["key"]}, ts=1.0)
    assert cli_main(["explain", "tk-left1", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "left behind" in out and "headers x-api-key, cookie; query parameters key" in out


@pytest.mark.parametrize("name", ["x-auth-token", "cf-aig-authorization", "x-acme-token", "helicone-auth"])
def test_a_header_condition_on_a_credential_never_shows_its_value(name):
    rules = load_rules_text(RULES + f"  - name: by-header\n    when: {{header: {{{name}: wanted}}}}\n    to: local\n")
    t = plan(rules, ant("o-1"), headers=[(name, CANARY)])
    (entry,) = [e for e in t.decision.trace if e["route"] == "by-header"]
    assert CANARY not in repr(entry) and f"header {name} does not have the rule's value" in entry["reasons"]


# ---------------------------------------------------------------- with shadow turns (issue 12)

SHADOW_ONLY = REFUSE.replace("routes:\n", """routes:
  - name: watch-haiku
    when: {client: anthropic, model: "*-haiku-shadowed"}
    shadow: local
""", 1)


def test_a_shadow_only_route_passes_its_turn_even_under_unmatched_refuse():
    t = plan(load_rules_text(SHADOW_ONLY), ant("claude-3-haiku-shadowed"))
    assert (t.action, t.local) == ("pass", None)
    assert t.decision.route is not None and t.decision.route.shadow == "local"
