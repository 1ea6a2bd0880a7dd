"""Codex signed in with ChatGPT (issue 39), planned without mitmproxy: its turns at the ChatGPT
backend are Responses turns with ``login: chatgpt`` (an API key's are ``api_key``), the rules'
``login`` predicate tells them apart and ``check`` refuses an unknown login with its file and
line, a turn leaving for another host carries none of the login's credentials (canary values),
a compaction goes only to a Responses endpoint, and the ``x-codex-…`` headers of a reply are
kept as they came, never a credential."""

from __future__ import annotations

import json

import pytest

from tokunseba import protocols
from tokunseba.credentials import is_credential_header, scrub
from tokunseba.protocols import openai_responses as resp
from tokunseba.routing import RulesError, decide, load_rules_text, turn_facts, who_lines
from tokunseba.protocols.openai_responses_ws import is_upgrade
from tokunseba.turn.plan import Turn, apply_header_changes, prepare_request
from tokunseba.proxy.provider_limits import limit_headers

from tests.support.planning import plan_request

ACCESS = "eyJhbGciOiJub25lIn0.eyJjYW5hcnkiOjF9.canary-access-token-93c1"  # the login's bearer (canary)
ACCOUNT = "acct-canary-8e4b17"
COOKIE = "__Secure-next-auth.session-token=canary-cookie-55aa"
ENDPOINT_KEY = "sk-endpoint-own-key-0420"
ENV = {"TK_KEY": ENDPOINT_KEY}
CHATGPT_HEADERS = [("Authorization", f"Bearer {ACCESS}"), ("ChatGPT-Account-ID", ACCOUNT), ("Cookie", COOKIE),
                   ("OpenAI-Organization", "org-canary-77"), ("OpenAI-Project", "proj-canary-78"),
                   ("originator", "codex_exec"), ("session-id", "0199-session"), ("version", "0.171.0"),
                   ("x-codex-turn-metadata", '{"request_kind":"turn"}'), ("content-type", "application/json"),
                   ("accept", "text/event-stream"), ("user-agent", "codex_exec/0.171.0")]
CANARIES = (ACCESS, ACCOUNT, "canary-cookie-55aa", "org-canary-77", "proj-canary-78")
BODY = json.dumps({"model": "gpt-6.2-sol", "instructions": "be brief", "stream": True,
                   "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}
                  ).encode()

RULES = """\
endpoints:
  claude:
    protocol: anthropic
    url: https://llm.example.com/v1
    key_env: TK_KEY
    max_tokens: 1024
  other-responses:
    protocol: openai-responses
    url: https://responses.example.net/v1
    key_env: TK_KEY
routes:
  - name: chatgpt-to-claude
    when: {login: chatgpt, model: "to-claude*"}
    to: claude
  - name: chatgpt-elsewhere
    when: {login: chatgpt}
    to: other-responses
  - name: api-keys-to-claude
    when: {login: api_key}
    to: claude
"""


@pytest.fixture(scope="module")
def rules():
    return load_rules_text(RULES, "rules.yaml")


def plan(rules, *, host="chatgpt.com", path=resp.CHATGPT_BASE_PATH + "/responses", headers=CHATGPT_HEADERS,
         body=BODY) -> Turn | None:
    return plan_request(rules, method="POST", host=host, port=443, path=path, headers=headers, body=body, env=ENV)


def outgoing(turn: Turn, headers) -> dict[str, str]:
    """The request headers as the adapter sends them: the plan's deletions, then its own headers."""
    gone = {n.lower() for n in apply_header_changes({k: v for k, v in headers}, turn)}
    out = {k.lower(): v for k, v in headers if k.lower() not in gone}
    out.update(turn.set_headers)
    return out


def test_a_chatgpt_turn_is_prepared_with_its_login_and_an_api_key_turn_with_its_own():
    at_chatgpt = prepare_request(method="POST", host="chatgpt.com", port=443, path="/backend-api/codex/responses",
                                 headers=CHATGPT_HEADERS, body=BODY)
    assert at_chatgpt is not None and at_chatgpt.det.backend == "chatgpt.com"
    assert at_chatgpt.facts.login == "chatgpt" and at_chatgpt.login == ("chatgpt", "sent to the ChatGPT backend "
                                                                                   "(chatgpt.com)")
    at_api = prepare_request(method="POST", host="api.openai.com", port=443, path="/v1/responses",
                             headers=[("authorization", "Bearer sk-codex")], body=BODY)
    assert at_api.facts.login == "api_key"
    anthropic = prepare_request(method="POST", host="api.anthropic.com", port=443, path="/v1/messages",
                                headers=[("x-api-key", "sk-ant")], body=b'{"model": "m", "messages": []}')
    assert anthropic.facts.login is None and anthropic.login is None  # its protocol does not tell


def test_the_login_is_an_event_of_the_turn_never_a_credential(rules):
    t = plan(rules)
    assert ("login", {"login": "chatgpt", "why": "sent to the ChatGPT backend (chatgpt.com)"}) in t.events
    seen = repr(t.events) + t.summary() + repr(t.decision.trace)
    assert not [c for c in CANARIES if c in seen]


def test_requests_that_are_not_turns_are_never_planned(rules):
    for method, path in [("GET", "/backend-api/codex/models?client_version=0.171.0"),
                         ("GET", "/backend-api/wham/accounts/check"), ("GET", "/backend-api/wham/usage"),
                         ("POST", "/backend-api/ps/mcp"), ("GET", "/backend-api/ps/plugins/installed?limit=200"),
                         ("POST", "/backend-api/codex/analytics-events/events"), ("GET", "/backend-api/codex/responses")]:
        assert plan_request(rules, method=method, host="chatgpt.com", port=443, path=path, headers=CHATGPT_HEADERS,
                            body=b"{}", env=ENV) is None, path
    assert plan_request(rules, method="POST", host="auth.openai.com", port=443, path="/oauth/token",
                        headers=[], body=b"{}", env=ENV) is None


def test_codexs_websocket_upgrade_at_the_chatgpt_backend_is_recognised():
    up = [("Upgrade", "websocket"), ("Connection", "Upgrade")]
    assert is_upgrade(method="GET", host="chatgpt.com", path="/backend-api/codex/responses", headers=up)
    assert is_upgrade(method="GET", host="api.openai.com", path="/v1/responses", headers=up)
    assert not is_upgrade(method="GET", host="chatgpt.com", path="/v1/responses", headers=up)
    assert not is_upgrade(method="GET", host="chatgpt.com", path="/backend-api/wham/responses", headers=up)


# ---------------------------------------------------------------- the predicate


def test_the_login_predicate_tells_the_two_logins_apart(rules):
    chatgpt = turn_facts(resp.PROTOCOL, json.loads(BODY), len(BODY), {}, login="chatgpt")
    api_key = turn_facts(resp.PROTOCOL, json.loads(BODY), len(BODY), {}, login="api_key")
    untold = turn_facts("anthropic", {"model": "m", "messages": []}, 10, {})
    d = decide(rules, chatgpt)
    assert (d.route.name, d.trace[1].reasons) == ("chatgpt-elsewhere", ["login: chatgpt, as the rule wants"])
    assert d.trace[0].reasons[0] == "login: chatgpt, as the rule wants" and not d.trace[0].matched  # its model did not
    assert decide(rules, api_key).route.name == "api-keys-to-claude"
    d = decide(rules, untold)
    assert d.route is None
    assert d.trace[2].reasons == ["login: a anthropic turn does not say which login sent it, rule wants api_key"]


@pytest.mark.parametrize("value,said", [
    ("oauth", "must be one of: chatgpt, api_key; got 'oauth'"),
    ("[chatgpt, api_key]", "must be a string, got a list"),
    ("", "must be a string, got nothing"),
])
def test_check_refuses_an_unknown_login_naming_the_file_and_line(value, said):
    text = f"routes:\n  - name: r\n    to: anthropic\n    when:\n      login: {value}\n"
    with pytest.raises(RulesError) as e:
        load_rules_text(text, "mine.yaml")
    assert str(e.value) == f"mine.yaml:5: route 'r': when.login {said}"


# ---------------------------------------------------------------- credentials never leave


def test_the_logins_credential_headers_are_protocol_facts():
    for name in ("ChatGPT-Account-ID", "chatgpt_account_id", "OpenAI-Organization", "OpenAI-Project", "Cookie",
                 "Authorization"):
        assert is_credential_header(name), name
    assert "chatgpt-account-id" in protocols.get(resp.PROTOCOL).credential_headers
    assert scrub({"headers": {"ChatGPT-Account-ID": ACCOUNT}}) == {"headers": {"ChatGPT-Account-ID": "<redacted>"}}
    assert ACCOUNT not in json.dumps(scrub({"chatgpt_account_id": ACCOUNT}))


def test_a_chatgpt_turn_retargeted_to_another_responses_host_carries_only_the_endpoints_key(rules):
    t = plan(rules)
    assert (t.action, t.endpoint.name, t.url) == ("retarget", "other-responses", "https://responses.example.net/v1/responses")
    out = outgoing(t, CHATGPT_HEADERS)
    assert out["authorization"] == f"Bearer {ENDPOINT_KEY}"
    assert not [c for c in CANARIES if c in json.dumps(out)]
    assert {"chatgpt-account-id", "cookie", "openai-organization", "openai-project", "session-id",
            "x-codex-turn-metadata", "originator"}.isdisjoint(out)
    assert t.body is None  # the body goes as Codex wrote it
    left = next(d for k, d in t.events if k == "left_behind")
    assert {"Authorization", "ChatGPT-Account-ID", "Cookie", "OpenAI-Organization"} <= set(left["headers"])


def test_a_chatgpt_turn_translated_to_anthropic_carries_only_the_endpoints_key(rules):
    t = plan(rules, body=BODY.replace(b"gpt-6.2-sol", b"to-claude-1"))
    assert (t.action, t.endpoint.name, t.url) == ("translate", "claude", "https://llm.example.com/v1/messages")
    out = outgoing(t, CHATGPT_HEADERS)
    assert out["x-api-key"] == ENDPOINT_KEY and "authorization" not in out
    assert not [c for c in CANARIES if c in json.dumps(out) + t.body.decode()]


# ---------------------------------------------------------------- compaction


def test_a_compaction_goes_only_to_a_responses_endpoint(rules):
    compact = resp.CHATGPT_BASE_PATH + "/responses/compact"
    body = BODY.replace(b'"stream": true, ', b"").replace(b"gpt-6.2-sol", b"to-claude-1")
    t = plan(rules, path=compact, body=body)
    assert t.detected.kind == "compact" and not t.stream
    assert (t.action, t.endpoint.name) == ("retarget", "other-responses")  # the Anthropic route refused it
    assert t.url == "https://responses.example.net/v1/responses/compact"
    (refused,) = [d for k, d in t.events if k == "route_refused"]
    assert refused["rule"] == "chatgpt-to-claude" and "compact requests go only to openai-responses" in refused["reason"]
    api = plan(rules, host="api.openai.com", path="/v1/responses/compact",
               headers=[("authorization", "Bearer sk-codex-key")], body=body)
    assert api.detected.kind == "compact" and api.outcome == "pass_through"  # api-keys-to-claude refused it
    assert any(k == "route_refused" for k, _ in api.events)


# ---------------------------------------------------------------- what the backend says about the account


def test_the_x_codex_headers_of_a_reply_are_kept_as_they_came():
    reply = [("Content-Type", "text/event-stream"), ("X-Codex-Primary-Used-Percent", "12"),
             ("x-codex-primary-window-minutes", "300"), ("x-codex-secondary-reset-at", "1767243600"),
             ("x-codex-session-token", "canary-never-kept"), ("x-request-id", "req_1"), ("set-cookie", "a=b")]
    assert limit_headers(reply) == [["x-codex-primary-used-percent", "12"], ["x-codex-primary-window-minutes", "300"],
                                    ["x-codex-secondary-reset-at", "1767243600"]]
    assert limit_headers([("content-type", "application/json")]) == []


def test_check_says_which_clients_can_tell_the_login(rules):
    (line,) = [w for w in who_lines(rules) if w.startswith("when.login")]
    assert "routes chatgpt-to-claude, chatgpt-elsewhere, api-keys-to-claude" in line
    assert "openai-responses clients" in line and "chatgpt.com" in line and "any other client cannot say" in line
