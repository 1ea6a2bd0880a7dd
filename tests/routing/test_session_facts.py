"""Who is talking (routing/session_facts.py): sessions, agents, background turns and clients read from
the pinned clients' captured requests, conversation fingerprints, and bad input (bounded,
escaped, never raising)."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import load_fixture
from tokunseba.protocols import clients as c
from tokunseba.routing.session_facts import Speaker, clean, client_of, fingerprint, opening_texts, speaker


def fx(name: str) -> tuple[dict, dict]:
    f = load_fixture(name + ".json")
    return {k.lower(): v for k, v in f["headers"]}, f["body"]


CC_SESSION = "8ab4b227-2d59-4cfb-ae7b-07b54465d764"


def cc_headers(**extra: str) -> dict:
    h, _ = fx("claude-code-print-main-turn")
    h[c.CC_SESSION_HEADER] = CC_SESSION
    h.update(extra)
    return h


# ---------------------------------------------------------------- the pinned clients


def test_claude_code_main_turn():
    _, body = fx("claude-code-print-main-turn")
    s = speaker("anthropic", cc_headers(), body)
    assert (s.client, s.client_version) == ("claude-code", "2.1.197")
    assert (s.session, s.session_fingerprint, s.session_from) == (CC_SESSION, False, "header x-claude-code-session-id")
    assert (s.agent, s.agent_id, s.background) == ("main", None, False)


def test_claude_code_subagent_turn_carries_its_agent_id():
    _, body = fx("claude-code-print-main-turn")
    s = speaker("anthropic", cc_headers(**{"x-claude-code-agent-id": "a52cbb60ec2510ca8"}), body)
    assert (s.agent, s.agent_id, s.background, s.session) == ("subagent", "a52cbb60ec2510ca8", False, CC_SESSION)


def test_claude_code_title_turn_is_background_and_a_background_session_says_so():
    h, body = fx("claude-code-title-haiku")
    h[c.CC_SESSION_HEADER] = CC_SESSION
    s = speaker("anthropic", h, body)
    assert (s.agent, s.background, s.background_why) == ("main", True, "declares no tools (a side query)")
    _, main = fx("claude-code-print-main-turn")
    s = speaker("anthropic", cc_headers(**{"x-app": "cli-bg"}), main)
    assert (s.agent, s.background, s.background_why) == ("main", True, "x-app: cli-bg")


def test_codex_session_is_its_prompt_cache_key_and_agent_its_agent_name():
    h, body = fx("codex-responses-gpt55-tool-followup")
    s = speaker("openai-responses", h, body)
    assert (s.client, s.client_version) == ("codex", "0.171.0")
    assert (s.session, s.session_fingerprint, s.session_from) == (
        "01a2370a-63bf-7eb1-bc1c-415c0e59d641", False, "body prompt_cache_key")
    assert (s.agent, s.background) == ("main", None)  # Codex does not say what is background
    sub = copy.deepcopy(h)
    sub[c.CODEX_TURN_METADATA_HEADER] = '{"agent_name":"/root/task_1","session_id":"x"}'
    s = speaker("openai-responses", sub, body)
    assert (s.agent, s.agent_id) == ("subagent", "/root/task_1")
    sub[c.CODEX_TURN_METADATA_HEADER] = '{"agent_name":"/root"}'  # what 0.171.0 sends for its main agent
    assert speaker("openai-responses", sub, body).agent == "main"
    # no prompt_cache_key: client_metadata.session_id
    body2 = {k: v for k, v in body.items() if k != "prompt_cache_key"}
    assert speaker("openai-responses", h, body2).session_from == "body client_metadata.session_id"


def test_gemini_cli_router_main_turn_and_follow_up_share_one_fingerprint():
    got = {speaker("gemini", *fx(n)) for n in ("gemini-cli-router-classifier", "gemini-cli-main-turn-yolo",
                                               "gemini-cli-tool-result-followup")}
    assert len({s.session for s in got}) == 1
    s = got.pop()
    assert s.session.startswith("fp-") and len(s.session) == 19 and s.session_fingerprint
    assert (s.client, s.client_version, s.agent, s.background) == ("gemini-cli", "0.61.0", None, None)


def test_a_different_opening_is_a_different_session():
    h, body = fx("gemini-cli-tool-result-followup")
    other = copy.deepcopy(body)
    other["contents"][0]["parts"][-1]["text"] = "another prompt"
    assert speaker("gemini", h, body).session != speaker("gemini", h, other).session
    # the same opening from another client is another session too
    assert fingerprint("gemini-cli", "gemini", body) != fingerprint("google-genai", "gemini", body)


def test_opening_texts_per_protocol_skip_instructions_and_stop_at_the_first_reply():
    assert opening_texts("anthropic", {"messages": [{"role": "user", "content": "a"},
                                                    {"role": "assistant", "content": "b"},
                                                    {"role": "user", "content": "c"}]}) == ["a"]
    assert opening_texts("openai", {"messages": [{"role": "system", "content": "sys"},
                                                 {"role": "user", "content": [{"type": "text", "text": "a"}]}]}) == ["a"]
    assert opening_texts("openai-responses", {"input": "hi"}) == ["hi"]
    assert opening_texts("openai-responses", {"input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "env"}]},
        {"role": "user", "content": "prompt"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"role": "user", "content": "later"}]}) == ["env", "prompt"]
    assert opening_texts("gemini", {"contents": [{"parts": [{"text": "t", "thought": True}, {"text": "a"}]}]}) == ["a"]
    assert opening_texts("anthropic", {"messages": [{"role": "assistant", "content": "x"}]}) == []
    assert fingerprint(None, "anthropic", {"messages": []}) is None


def test_sdks_are_named_by_their_user_agent():
    assert client_of("Anthropic/Python 2.16.0") == ("anthropic-python", "2.16.0")
    assert client_of("OpenAI/Python 3.57.0") == ("openai-python", "3.57.0")
    assert client_of("google-genai-sdk/3.6.1 gl-python/3.12.1") == ("google-genai", "3.6.1")
    assert client_of("GeminiCLI-tui/0.61.0/gemini-2.5-pro (linux; x64; terminal)") == ("gemini-cli", "0.61.0")
    assert client_of("codex_exec/0.171.0 (Debian 12.0.0; x86_64) dumb (codex_exec; 0.171.0)") == ("codex", "0.171.0")
    assert client_of("curl/8.5.0") == ("curl", "8.5.0")
    assert client_of("node") == ("node", None)
    assert client_of(None) == (None, None) and client_of("") == (None, None)


# ---------------------------------------------------------------- bad input


def test_a_10kb_junk_session_header_is_bounded_and_two_junks_stay_apart():
    _, body = fx("claude-code-print-main-turn")
    junk = "J" * 10_240
    s1 = speaker("anthropic", cc_headers(**{c.CC_SESSION_HEADER: junk}), body)
    s2 = speaker("anthropic", cc_headers(**{c.CC_SESSION_HEADER: junk + "x"}), body)
    assert len(s1.session) <= c.MAX_SESSION_CHARS and len(s2.session) <= c.MAX_SESSION_CHARS
    assert s1.session.startswith("JJJJ") and s1.session != s2.session
    assert speaker("anthropic", cc_headers(**{c.CC_SESSION_HEADER: junk}), body).session == s1.session  # stable


def test_control_characters_are_escaped():
    _, body = fx("claude-code-print-main-turn")
    s = speaker("anthropic", cc_headers(**{c.CC_SESSION_HEADER: "ab\x00\x1b[31m\u2028é\ud800",
                                           "x-claude-code-agent-id": "\r\nagent\x7f"}), body)
    assert s.session == "ab\\x00\\x1b[31m\\u2028\\xe9\\ud800"
    assert s.agent_id == "agent\\x7f"  # surrounding whitespace stripped, the rest escaped
    assert all(" " <= ch <= "~" or ch == "…" for ch in s.session + s.agent_id)


def test_a_missing_session_value_falls_back_to_the_fingerprint():
    _, body = fx("claude-code-print-main-turn")
    s = speaker("anthropic", cc_headers(**{c.CC_SESSION_HEADER: "   "}), body)
    assert s.session_fingerprint and s.session.startswith("fp-") and s.client == "claude-code"
    # an agent header with no value still says "a subagent" (its id unknown)
    s = speaker("anthropic", cc_headers(**{"x-claude-code-agent-id": ""}), body)
    assert (s.agent, s.agent_id) == ("subagent", None)


def test_odd_bodies_and_metadata_never_raise():
    h, body = fx("codex-responses-gpt55-tool-followup")
    for odd in ({"prompt_cache_key": ["list"], "client_metadata": "text"}, {"prompt_cache_key": {"a": 1}},
                {"client_metadata": {"session_id": 12345}}, [], None, "str", {"input": [None, 3, {"role": 5}]}):
        s = speaker("openai-responses", {**h, c.CODEX_TURN_METADATA_HEADER: "{not json"}, odd)
        assert isinstance(s, Speaker)
    assert speaker("openai-responses", h, {"client_metadata": {"session_id": 12345}}).session == "12345"
    assert clean(None, 10) is None and clean({"a": 1}, 10) is None and clean("", 10) is None


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["user-agent", c.CC_SESSION_HEADER, c.CC_AGENT_HEADER, "x-app",
                                        c.CODEX_TURN_METADATA_HEADER, "session-id"]), st.text(max_size=300)),
       st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=50),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
                        st.sampled_from(["messages", "input", "contents", "role", "content", "parts", "text",
                                         "prompt_cache_key", "client_metadata", "tools", "session_id"]), kids,
                        max_size=5), max_leaves=20),
       st.sampled_from(["anthropic", "openai", "openai-responses", "gemini"]))
def test_any_input_gives_a_bounded_printable_speaker(headers, body, protocol):
    s = speaker(protocol, headers, body)
    for value, limit in ((s.session, c.MAX_SESSION_CHARS), (s.agent_id, c.MAX_AGENT_CHARS),
                         (s.client, c.MAX_NAME_CHARS), (s.client_version, c.MAX_VERSION_CHARS)):
        assert value is None or (len(value) <= limit and all(" " <= ch <= "~" or ch == "…" for ch in value))


# ---------------------------------------------------------------- a fingerprint hashed when read (lazy=True)


def test_a_lazy_fingerprint_is_the_eager_one_hashed_only_when_read():
    h, body = fx("gemini-cli-main-turn-yolo")
    eager, lazy = speaker("gemini", h, body), speaker("gemini", h, body, lazy=True)
    assert "session" not in vars(lazy)  # not hashed by reading the request
    assert lazy.own_session is None and lazy.session_fingerprint and "session" not in vars(lazy)
    deferred: list = []
    fields = lazy.ledger_fields(lambda fn: deferred.append(fn) or "later")
    assert fields["session_id"] == "later" and fields["session_fingerprint"] == 1 and "session" not in vars(lazy)
    assert {k: v for k, v in fields.items() if k != "session_id"} == {
        k: v for k, v in eager.ledger_fields().items() if k != "session_id"}
    assert deferred[0]() == eager.session  # what the ledger's writer computes
    assert lazy == eager and eager == lazy and hash(lazy) == hash(eager) and repr(lazy) == repr(eager)
    assert lazy.ledger_fields(lambda fn: "later") == eager.ledger_fields()  # hashed already: given as it is


def test_a_session_the_client_sends_is_never_deferred():
    h, body = fx("claude-code-print-main-turn")
    h[c.CC_SESSION_HEADER] = CC_SESSION
    lazy = speaker("anthropic", h, body, lazy=True)
    assert type(lazy) is Speaker and lazy.own_session == CC_SESSION == lazy.session
    assert lazy.ledger_fields(lambda fn: "later")["session_id"] == CC_SESSION
