"""OpenAI Chat Completions requests: the decoder (Chat -> neutral) and the encoder (neutral ->
Chat) (docs/dev/protocols.md B.1-B.4, E.1).

The neutral request speaks Chat's vocabulary (neutral.conversation), so decoding a Chat
body is taking it as it came (each target's encoder has a row for every Chat field), and
encoding applies what the endpoint asks of a Chat request, one table row each
(``ENCODE_STEPS``): the system role it takes, the name of its max-tokens field and its cap,
``stream_options.include_usage`` as plumbing (without it an OpenAI upstream streams no usage
at all: docs/dev/pitfalls.md 13), at most four stop strings.
"""

from __future__ import annotations

from typing import Any

from collections.abc import Callable

from ...errors import Refused
from ...neutral import Capped, Conversation, RequestTranslation
from ...neutral import JSON_SCHEMA, PLUMBING_NAME
from ...neutral import PROVIDER_STATE, ProviderState
from ...neutral import ClientTool, freeform_input, freeform_tools
from .. import fieldtable as ft

SYSTEM_ROLES = ("system", "developer")
MAX_TOKENS_FIELDS = ("max_completion_tokens", "max_tokens")
OPENAI_MAX_STOP = 4
OPENAI_TOOL_NAME_MAX = 64  # docs/dev/pitfalls.md 20


def check_options(system_role: str, max_tokens_field: str) -> None:
    """Endpoint settings for a Chat target; a wrong one is a configuration mistake (ValueError)."""
    if system_role not in SYSTEM_ROLES:
        raise ValueError(f"system_role must be one of {SYSTEM_ROLES}, not {system_role!r}")
    if max_tokens_field not in MAX_TOKENS_FIELDS:
        raise ValueError(f"max_tokens_field must be one of {MAX_TOKENS_FIELDS}, not {max_tokens_field!r}")


def decode(body: dict[str, Any]) -> Conversation:
    """A Chat Completions request body is already neutral: taken as it came (not copied:
    encoders never mutate their input)."""
    ft.check_body(body, "Chat")
    n = body.get("n")
    if n is not None and ft.integer(n, "n") != 1:  # the same toward every target: refused, not a 400
        raise Refused(400, f"n: {n} choices requested; every other protocol returns exactly one")
    return Conversation(body=body)


def _system_role(conv: Conversation, rt: RequestTranslation, out: dict[str, Any], o: ft.Options) -> None:
    if o.system_role != "system" and any(m.get("role") == "system" for m in out.get("messages") or ()):
        out["messages"] = [{**m, "role": o.system_role} if m.get("role") == "system" else m for m in out["messages"]]


def _max_tokens(conv: Conversation, rt: RequestTranslation, out: dict[str, Any], o: ft.Options) -> None:
    n = out.pop("max_completion_tokens", None)
    if n is None:
        if o.max_tokens_cap is not None:  # the client named no limit: the endpoint's is the turn's (plumbing)
            out[o.max_tokens_field] = o.max_tokens_cap
            rt.plumbing.append(o.max_tokens_field)
            rt.capped = Capped(asked=None, cap=o.max_tokens_cap)
        return
    if o.max_tokens_cap is not None and n > o.max_tokens_cap:
        rt.capped = Capped(asked=n, cap=o.max_tokens_cap)
        n = o.max_tokens_cap
        rt.converted.append(f"{conv.client_path('max_completion_tokens')} -> {o.max_tokens_field} (capped at {n})")
    out[o.max_tokens_field] = n


def _stream_options(conv: Conversation, rt: RequestTranslation, out: dict[str, Any], o: ft.Options) -> None:
    if out.get("stream"):
        out["stream_options"] = {"include_usage": True}
        rt.plumbing.append("stream_options.include_usage")


def _stop(conv: Conversation, rt: RequestTranslation, out: dict[str, Any], o: ft.Options) -> None:
    stop = out.get("stop")
    if isinstance(stop, list) and len(stop) > OPENAI_MAX_STOP:
        out["stop"] = stop[:OPENAI_MAX_STOP]
        rt.dropped.extend(conv.client_path(f"stop[{i}]") for i in range(OPENAI_MAX_STOP, len(stop)))


def _provider_state(conv: Conversation, rt: RequestTranslation, out: dict[str, Any], o: ft.Options) -> None:
    msgs = out.get("messages")
    if not isinstance(msgs, list) or not any(type(m) is dict and PROVIDER_STATE in m for m in msgs):
        return
    new = []
    for i, m in enumerate(msgs):
        if type(m) is dict and PROVIDER_STATE in m:
            m = dict(m)
            st = m.pop(PROVIDER_STATE)
            if isinstance(st, ProviderState) and st.protocol == "openai":
                m[st.payload["field"]] = st.payload["text"]  # this endpoint's own reasoning, as it wrote it
            else:
                rt.dropped.append(conv.client_path(f"messages[{i}].{PROVIDER_STATE}"))
        new.append(m)
    out["messages"] = new


def _tool_names(conv: Conversation, rt: RequestTranslation, out: dict[str, Any], o: ft.Options) -> None:
    # the neutral body is a decoder's output: every tool is {"type": "function", "function": {"name": str, ...}}
    for i, t in enumerate(out.get("tools") or ()):
        if len(name := t["function"]["name"]) > OPENAI_TOOL_NAME_MAX:
            ft.name_within(name, f"tools[{i}].name", OPENAI_TOOL_NAME_MAX, "Chat Completions")


def _custom_declaration(name: str, fn: dict[str, Any], tool: ClientTool) -> dict[str, Any]:
    custom: dict[str, Any] = {"name": name}
    if "description" in fn:
        custom["description"] = fn["description"]
    if tool.grammar is not None:
        syntax, definition = tool.grammar
        grammar = {"definition": definition, **({"syntax": syntax} if syntax else {})}
        custom["format"] = {"type": "grammar", "grammar": grammar}
    return {"type": "custom", "custom": custom}


def _custom_call(tc: dict[str, Any]) -> dict[str, Any]:
    """A past call of a freeform tool as Chat's custom call; as it is when its arguments are not
    the encoding's ``{"input": <string>}`` (never guessed)."""
    fn = tc.get("function")
    args = fn.get("arguments") if isinstance(fn, dict) else None
    text = freeform_input(args) if isinstance(args, str) else None
    if text is None or not isinstance(fn, dict):
        return tc
    return {"id": tc.get("id"), "type": "custom", "custom": {"name": fn["name"], "input": text}}


def _custom_tools(conv: Conversation, rt: RequestTranslation, out: dict[str, Any], o: ft.Options) -> None:
    if not o.native_custom_tools or not conv.client_tools:
        return
    free = freeform_tools(conv.client_tools)
    if not free:
        return
    tools = out.get("tools") or []
    if any(t.get("type") == "function" and t.get("function", {}).get("name") in free for t in tools):
        out["tools"] = [_custom_declaration(fn["name"], fn, free[fn["name"]])
                        if t.get("type") == "function" and (fn := t.get("function", {})).get("name") in free else t
                        for t in tools]
        rt.converted.append("tools: the client's freeform tools as Chat custom tools, each grammar as its format "
                            "(this endpoint takes them as they are: custom_tools native)")
    msgs = out.get("messages") or []
    if any(m.get("tool_calls") for m in msgs if type(m) is dict):
        out["messages"] = [
            {**m, "tool_calls": [_custom_call(tc) if type(tc) is dict and type(tc.get("function")) is dict
                                 and tc["function"].get("name") in free else tc for tc in m["tool_calls"]]}
            if type(m) is dict and m.get("tool_calls") else m
            for m in msgs]
    choice = out.get("tool_choice")
    if type(choice) is dict and choice.get("type") == "function" and choice.get("function", {}).get("name") in free:
        out["tool_choice"] = {"type": "custom", "custom": {"name": choice["function"]["name"]}}


def _response_format(conv: Conversation, rt: RequestTranslation, out: dict[str, Any], o: ft.Options) -> None:
    """A json_schema format without a name (Anthropic's and Gemini's have none) gets one: Chat requires it."""
    fmt = out.get("response_format")
    if type(fmt) is not dict or fmt.get("type") != JSON_SCHEMA:
        return
    spec = fmt.get("json_schema")
    if type(spec) is dict and "name" not in spec:
        out["response_format"] = {**fmt, "json_schema": {"name": PLUMBING_NAME, **spec}}
        rt.plumbing.append("response_format.json_schema.name")


# what the endpoint asks of a neutral request, in order -> why
ENCODE_STEPS: dict[Callable[[Conversation, RequestTranslation, dict[str, Any], ft.Options], None], str] = {
    _tool_names: "tool names longer than 64 characters refuse the turn (OpenAI's limit)",
    _custom_tools: "an endpoint that takes freeform tools as they are (custom_tools native: OpenAI's own API) gets "
                   "the client's as Chat custom tools with their grammar, past calls as custom calls (their input "
                   "byte for byte); any other Chat endpoint gets functions of one string 'input' (neutral/tools.py)",
    _provider_state: "restored state of this endpoint and model -> its reasoning_content / reasoning on the "
                     "assistant message (DeepSeek's thinking mode requires it back in a tool loop)",
    _system_role: "system messages take the endpoint's system_role (system or developer)",
    _max_tokens: "max_completion_tokens -> the endpoint's max_tokens_field, capped by its max_tokens",
    _stream_options: "+ stream_options.include_usage (plumbing) when streaming",
    _stop: "Chat takes at most 4 stop strings: the rest dropped",
    _response_format: "the neutral response_format is Chat's (neutral/output_format.py); a json_schema without a "
                      "name (from Anthropic or Gemini) gets 'response' as plumbing: Chat requires json_schema.name "
                      "(platform.openai.com/docs/api-reference/chat/create, response_format); strict stays as the "
                      "client said (absent: Chat's default, false)",
}


def encode(conv: Conversation, *, system_role: str = "system", max_tokens_field: str = "max_completion_tokens",
           max_tokens: int | None = None, native_custom_tools: bool = False, **_: object) -> RequestTranslation:
    """A neutral conversation as a Chat Completions request body."""
    check_options(system_role, max_tokens_field)
    out = dict(conv.body)
    rt = RequestTranslation(body=out)
    o = ft.Options(system_role, max_tokens_field, max_tokens, native_custom_tools=native_custom_tools)
    for step in ENCODE_STEPS:
        step(conv, rt, out, o)
    return rt


# ---------------------------------------------------------------------------------------
# explicit cache breakpoints (OpenAI GPT-5.6+: prompt_cache_breakpoint on a content part), for an
# endpoint that says it takes them (cache: breakpoints | auto); billing plumbing, not content
# ---------------------------------------------------------------------------------------

MAX_BREAKPOINTS = 4  # OpenAI takes at most 4 cache writes in a request
BREAKPOINT = {"mode": "explicit"}
_UNMARKABLE_ROLES = ("assistant",)  # assistant output blocks take no breakpoint


def _marked(m: Any) -> bool:
    content = m.get("content") if isinstance(m, dict) else None
    return isinstance(content, list) and any(isinstance(p, dict) and "prompt_cache_breakpoint" in p for p in content)


def mark_breakpoints(body: dict[str, Any], indexes: list[int]) -> list[str]:
    """A breakpoint on the last content part of each of ``messages[indexes]`` (a string content
    becomes its one text part, the same text), at most ``MAX_BREAKPOINTS`` in the body; changed
    in place with containers of its own. Returns the paths added; assistant messages are skipped."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    room = MAX_BREAKPOINTS - sum(1 for m in messages if _marked(m))
    added: list[str] = []
    for i in indexes:
        if len(added) >= room or not 0 <= i < len(messages):
            break
        m = messages[i]
        if not isinstance(m, dict) or m.get("role") in _UNMARKABLE_ROLES or _marked(m):
            continue
        content = m.get("content")
        if isinstance(content, str) and content:
            messages[i] = {**m, "content": [{"type": "text", "text": content, "prompt_cache_breakpoint": dict(BREAKPOINT)}]}
            added.append(f"messages[{i}].content[0].prompt_cache_breakpoint")
        elif isinstance(content, list) and content and isinstance(content[-1], dict):
            messages[i] = {**m, "content": [*content[:-1], {**content[-1], "prompt_cache_breakpoint": dict(BREAKPOINT)}]}
            added.append(f"messages[{i}].content[{len(content) - 1}].prompt_cache_breakpoint")
    return added


def place_cache_breakpoints(body: dict[str, Any]) -> list[str]:
    """``cache: auto``: breakpoints on the stable prefix, as the Anthropic encoder places them:
    the last message (unless the assistant's), the previous user message, the first system message."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return []
    last = len(messages) - 1
    spots = [last]
    prev = next((i for i in range(last - 1, -1, -1) if isinstance(messages[i], dict) and messages[i].get("role") == "user"), None)
    if prev is not None:
        spots.append(prev)
    first_system = next((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") in ("system", "developer")), None)
    if first_system is not None and first_system not in spots:
        spots.append(first_system)
    return mark_breakpoints(body, spots)
