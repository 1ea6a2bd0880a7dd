"""Properties of request translation (hypothesis): tool-call ids byte-identical both ways;
every leaf of a translated request comes from the input or from recorded plumbing; a round
trip Anthropic -> Chat -> Anthropic keeps everything the table maps; garbage in gives a
TranslationError and nothing else, and the input is never mutated."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokunseba import jsonc
from tokunseba.errors import TranslationError
from tests.support.pairs import anthropic_to_chat, chat_to_anthropic
from tokunseba.translate.anthropic.decode import DECODE_FIELDS as A2C_FIELDS
from tokunseba.translate.anthropic.encode import ENCODE_FIELDS as C2A_FIELDS

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CHARS = st.characters(blacklist_categories=("Cs",))  # no lone surrogates: not representable in UTF-8 JSON
# texts without newlines, so a "\n\n"-joined output splits back into its input pieces
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), min_size=1, max_size=12)
ANY_ID = st.text(CHARS, min_size=1, max_size=16)  # any id travels A -> Chat
ANTHROPIC_ID = st.from_regex(r"[A-Za-z0-9_-]{1,24}", fullmatch=True)
NAME = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
SCALAR = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | TEXT
JSON = st.recursive(SCALAR, lambda c: st.lists(c, max_size=3) | st.dictionaries(TEXT, c, max_size=3), max_leaves=8)
TOOL_INPUT = st.dictionaries(TEXT, JSON, max_size=4)
B64 = st.from_regex(r"[A-Za-z0-9+/]{4,16}={0,2}", fullmatch=True)
MEDIA = st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"])
CACHE = {"type": "ephemeral"}


def _text_block(draw, extras: bool) -> dict:
    b = {"type": "text", "text": draw(TEXT)}
    if extras and draw(st.booleans()):
        b["cache_control"] = dict(CACHE)
    return b


@st.composite
def anthropic_requests(draw, *, ids=ANTHROPIC_ID, extras: bool = False) -> dict:
    """A well-formed Anthropic request. Without ``extras`` it uses only what the A2C table maps;
    with them it adds droppable fields, images, documents, thinking and cache_control."""
    tool_names = draw(st.lists(NAME, max_size=3, unique=True))
    used: set[str] = set()
    messages: list[dict] = []
    pending: list[dict] = []  # tool_result blocks that open the next user turn
    for _ in range(draw(st.integers(1, 3))):
        user: list[dict] = list(pending)
        for _ in range(draw(st.integers(0 if pending else 1, 2))):
            user.append(_text_block(draw, extras))
        if extras and draw(st.booleans()):
            user.append({"type": "image", "source": {"type": "base64", "media_type": draw(MEDIA), "data": draw(B64)}})
        if extras and draw(st.booleans()):
            doc = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": draw(B64)}}
            user.append(doc | ({"title": draw(TEXT)} if draw(st.booleans()) else {}))
        plain = not extras and not pending and len(user) == 1 and draw(st.booleans())
        messages.append({"role": "user", "content": user[0]["text"] if plain else user})
        assistant: list[dict] = []
        if extras and draw(st.booleans()):
            assistant.append({"type": "thinking", "thinking": draw(TEXT), "signature": draw(TEXT)})
        assistant += [_text_block(draw, extras) for _ in range(draw(st.integers(0, 2)))]
        pending = []
        for _ in range(draw(st.integers(0, 2)) if tool_names else 0):
            tid = draw(ids.filter(lambda x: x not in used))
            used.add(tid)
            assistant.append({"type": "tool_use", "id": tid, "name": draw(st.sampled_from(tool_names)), "input": draw(TOOL_INPUT)})
            result = {"type": "tool_result", "tool_use_id": tid, "content": draw(TEXT)}
            if extras and draw(st.booleans()):
                result["is_error"] = draw(st.booleans())
            pending.append(result)
        if not assistant:
            assistant.append({"type": "text", "text": draw(TEXT)})
        messages.append({"role": "assistant", "content": assistant})
    if pending:
        messages.append({"role": "user", "content": pending})

    body: dict = {"model": draw(TEXT), "messages": messages, "max_tokens": draw(st.integers(1, 200_000))}
    if draw(st.booleans()):
        body["system"] = draw(TEXT) if draw(st.booleans()) else [_text_block(draw, extras) for _ in range(draw(st.integers(1, 3)))]
    if tool_names:
        body["tools"] = [{"name": n, "description": draw(TEXT), "input_schema": {"type": "object", "properties": draw(
            st.dictionaries(TEXT, st.just({"type": "string"}), max_size=2))}} for n in tool_names]
        if draw(st.booleans()):
            choice = draw(st.sampled_from([{"type": "auto"}, {"type": "any"}, {"type": "none"}, {"type": "tool", "name": tool_names[0]}]))
            if choice["type"] != "none" and draw(st.booleans()):
                choice["disable_parallel_tool_use"] = draw(st.booleans())
            body["tool_choice"] = choice
    for key, strat in (("temperature", st.floats(0, 1)), ("top_p", st.floats(0, 1)), ("stream", st.booleans()),
                       ("stop_sequences", st.lists(TEXT, min_size=1, max_size=4))):
        if draw(st.booleans()):
            body[key] = draw(strat)
    if extras:
        for key, value in (("top_k", 5), ("thinking", {"type": "adaptive"}), ("metadata", {"user_id": draw(TEXT)}),
                           ("output_config", {"effort": "high"}), ("context_management", {"edits": []})):
            if draw(st.booleans()):
                body[key] = value
    return body


@st.composite
def chat_requests(draw) -> dict:
    """A well-formed Chat request with tool calls, tool messages, parts and droppable fields."""
    messages: list[dict] = [{"role": draw(st.sampled_from(["system", "developer"])), "content": draw(TEXT)}] if draw(st.booleans()) else []
    used: set[str] = set()
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            messages.append({"role": "user", "content": draw(TEXT)})
        else:
            parts = [{"type": "text", "text": draw(TEXT)}]
            if draw(st.booleans()):
                parts.append({"type": "image_url", "image_url": {"url": f"data:{draw(MEDIA)};base64,{draw(B64)}", "detail": "low"}})
            if draw(st.booleans()):
                parts.append({"type": "file", "file": {"file_data": f"data:application/pdf;base64,{draw(B64)}", "filename": draw(TEXT)}})
            messages.append({"role": "user", "content": parts})
        calls = []
        for _ in range(draw(st.integers(0, 2))):
            tid = draw(ANTHROPIC_ID.filter(lambda x: x not in used))
            used.add(tid)
            args = draw(TOOL_INPUT)
            calls.append({"id": tid, "type": "function", "function": {"name": draw(NAME), "arguments": jsonc.dumps(args) if args else draw(st.sampled_from(["", "{}"]))}})
        msg: dict = {"role": "assistant", "content": draw(TEXT) if draw(st.booleans()) or not calls else draw(st.sampled_from([None, ""]))}
        if calls:
            msg["tool_calls"] = calls
        messages.append(msg)
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": draw(TEXT)} for c in calls]
        if draw(st.booleans()):
            messages.append({"role": "system", "content": draw(TEXT)})
    body: dict = {"model": draw(TEXT), "messages": messages, "max_completion_tokens": draw(st.integers(1, 10**5))}
    if draw(st.booleans()):
        body["tools"] = [{"type": "function", "function": {"name": draw(NAME), "description": draw(TEXT), "parameters": {"type": "object"}}}]
        if draw(st.booleans()):
            body["tool_choice"] = draw(st.sampled_from(["auto", "required", "none"]))
        if draw(st.booleans()):
            body["parallel_tool_calls"] = draw(st.booleans())
    for key, strat in (("temperature", st.floats(0, 2)), ("top_p", st.floats(0, 1)), ("stream", st.booleans()),
                       ("stop", TEXT | st.lists(TEXT, min_size=1, max_size=4)), ("user", TEXT), ("seed", st.integers(0, 99)),
                       ("stream_options", st.just({"include_usage": True}))):
        if draw(st.booleans()):
            body[key] = draw(strat)
    return body


# ---------------------------------------------------------------------------------------
# tool-call ids
# ---------------------------------------------------------------------------------------


def _anthropic_ids(body: dict) -> list[str]:
    return [b.get("id") or b.get("tool_use_id") for m in body["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b["type"] in ("tool_use", "tool_result")]


def _chat_ids(body: dict) -> list[str]:
    out: list[str] = []
    for m in body["messages"]:
        out += [c["id"] for c in m.get("tool_calls") or []]
        if m["role"] == "tool":
            out.append(m["tool_call_id"])
    return out


@SETTINGS
@given(anthropic_requests(ids=ANY_ID))
def test_tool_ids_byte_identical_anthropic_to_chat(body):
    out = anthropic_to_chat(body).body
    assert _chat_ids(out) == _anthropic_ids(body)


@SETTINGS
@given(chat_requests())
def test_tool_ids_byte_identical_chat_to_anthropic(body):
    out = chat_to_anthropic(body).body
    assert _anthropic_ids(out) == _chat_ids(body)


# ---------------------------------------------------------------------------------------
# provenance: every output leaf comes from the input or from recorded plumbing
# ---------------------------------------------------------------------------------------

VOCAB = {"system", "developer", "user", "assistant", "tool", "function", "text", "image_url", "file", "auto",
         "required", "none", "any", "tool_use", "tool_result", "image", "document", "base64", "url"}


def _leaves(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, obj


def _sources(body: dict) -> tuple[set, set, set, set]:
    """Strings, numbers (and null), booleans and JSON-serialised objects found in the input."""
    strings, numbers, bools, objects = set(), set(), set(), set()

    def walk(o):
        if isinstance(o, dict):
            objects.add(jsonc.dumps(o))
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
        elif isinstance(o, bool):
            bools.add(o)
        elif o is None or isinstance(o, int | float):
            numbers.add(o)
        elif isinstance(o, str):
            strings.add(o)
            if o.startswith("{"):
                try:
                    walk(jsonc.loads(o))  # tool-call arguments: their values become tool_use input
                except jsonc.JSONDecodeError:
                    pass
            if o.startswith("data:") and "," in o:  # a data URL splits into media type and data
                head, _, data = o.partition(",")
                strings.update({head[5:].split(";")[0], data})

    walk(body)
    return strings, numbers, bools, objects


# the declared encoding of a freeform tool (neutral/tools.py): its schema's own words, which the
# client did not send but the encoding declares (a function of one required string "input")
FREEFORM_SCHEMA_WORDS = {"object", "string", "input", False}


def _freeform_schemas(rt) -> list[str]:
    """The body paths of the schemas of freeform tools' functions (Chat / Anthropic shapes)."""
    freeform = {n for n, t in getattr(rt, "client_tools", {}).items() if t.freeform}
    out = []
    for i, t in enumerate(rt.body.get("tools") or ()):
        name = (t.get("function") or t).get("name")
        if name in freeform:
            out.append(f"tools[{i}].function.parameters" if "function" in t else f"tools[{i}].input_schema")
    return out


def _assert_provenance(inp: dict, rt) -> None:
    strings, numbers, bools, objects = _sources(inp)
    schemas = _freeform_schemas(rt)
    # a value the translation reports converted into a field (effort -> thinking budget: neutral/effort.py)
    converted_into = {c.split("-> ", 1)[1].split()[0].split(".")[0] for c in rt.converted if "-> " in c}
    for path, v in _leaves(rt.body):
        if any(path == p or path.startswith((p + ".", p + "[")) for p in rt.plumbing):
            continue
        if path.split(".")[0].split("[")[0] in converted_into - {"messages", "tools", "system"}:
            continue
        if v in FREEFORM_SCHEMA_WORDS and any(path.startswith(p + ".") for p in schemas):
            continue  # a freeform tool's declared encoding
        last = path.rsplit(".", 1)[-1]
        if last in ("role", "type") or path == "tool_choice":
            assert v in VOCAB or v in strings, (path, v)
        elif v == "" and last.startswith("content"):
            continue  # the empty join: an assistant turn of tool calls only gets "" (never null)
        elif isinstance(v, str):
            ok = (v in strings or v in objects or all(s in strings for s in v.split("\n\n"))
                  or (v.startswith("data:") and all(s in strings for s in (v[5:].split(";")[0], v.partition(",")[2]))))
            assert ok, (path, v)
        elif isinstance(v, bool):
            # parallel_tool_calls / disable_parallel_tool_use are each other's negation
            assert v in bools or (path in ("parallel_tool_calls", "tool_choice.disable_parallel_tool_use") and (not v) in bools), (path, v)
        else:  # numbers and null
            assert v in numbers, (path, v)


@SETTINGS
@given(anthropic_requests(extras=True))
def test_anthropic_to_chat_invents_nothing(body):
    _assert_provenance(body, anthropic_to_chat(body))


@SETTINGS
@given(chat_requests())
def test_chat_to_anthropic_invents_nothing(body):
    _assert_provenance(body, chat_to_anthropic(body))


# ---------------------------------------------------------------------------------------
# round trip A -> Chat -> A keeps every mapped field
# ---------------------------------------------------------------------------------------


def _norm_messages(messages: list[dict]) -> list[tuple]:
    """role, joined text, tool uses and tool results of each message."""
    out = []
    for m in messages:
        c = m["content"]
        blocks = [{"type": "text", "text": c}] if isinstance(c, str) else c
        out.append((
            m["role"],
            "\n\n".join(b["text"] for b in blocks if b["type"] == "text"),
            [(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"],
            [(b["tool_use_id"], b.get("content")) for b in blocks if b["type"] == "tool_result"],
        ))
    return out


def _system_text(system) -> str | None:
    if system is None or isinstance(system, str):
        return system
    return "\n\n".join(b["text"] for b in system)


MAPPED_A2C = ("model", "tools", "tool_choice", "temperature", "top_p", "stop_sequences", "max_tokens", "stream")


@SETTINGS
@given(anthropic_requests())
def test_round_trip_anthropic_chat_anthropic_keeps_mapped_fields(body):
    chat = anthropic_to_chat(body)
    assert chat.dropped == [] and chat.converted == []
    back = chat_to_anthropic(chat.body)
    assert back.dropped == [] and back.plumbing == []
    out = back.body
    for key in MAPPED_A2C:
        assert out.get(key) == body.get(key), key
    assert _system_text(out.get("system")) == _system_text(body.get("system"))
    assert _norm_messages(out["messages"]) == _norm_messages(body["messages"])
    assert set(out) <= set(body)


def test_round_trip_covers_every_mapped_field():
    """The round-trip property checks every field the A2C table maps or converts losslessly."""
    checked = set(MAPPED_A2C) | {"system", "messages"}
    # effort converts through levels, lossy by design (a budget comes back as its level's): tests/neutral/test_effort.py
    by_level = {"thinking", "output_config"}
    # the structured-outputs beta's top-level spelling comes back as output_config.format: tests/neutral/test_output_format.py
    respelled = {"output_format"}
    assert {k for k, (action, _, _) in A2C_FIELDS.items() if action != "dropped"} == checked | by_level | respelled


# ---------------------------------------------------------------------------------------
# garbage in: only TranslationError comes out, the input stays untouched
# ---------------------------------------------------------------------------------------


def _slots(obj):
    """(container, key) for every value inside ``obj``."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in list(items):
        yield obj, k
        yield from _slots(v)


@st.composite
def mutated(draw, base):
    body = copy.deepcopy(draw(base))
    for _ in range(draw(st.integers(1, 3))):
        slots = list(_slots(body))
        if not slots:
            break
        container, key = draw(st.sampled_from(slots))
        if draw(st.booleans()):
            del container[key]
        else:
            container[key] = draw(JSON)
    return body


KNOWN_KEYS = st.sampled_from(sorted(set(A2C_FIELDS) | set(C2A_FIELDS)))
GARBAGE = (
    st.dictionaries(KNOWN_KEYS | TEXT, JSON, max_size=6)
    | mutated(anthropic_requests(extras=True))
    | mutated(chat_requests())
    | JSON
)


def _only_translation_error(fn, body, **kw):
    before = copy.deepcopy(body)
    try:
        rt = fn(body, **kw)
    except TranslationError as e:
        assert e.status == 400 and e.message
    else:
        jsonc.dumpb(rt.body)
    assert body == before


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(GARBAGE)
def test_garbage_in_gives_only_translation_errors(body):
    _only_translation_error(anthropic_to_chat, body)
    _only_translation_error(anthropic_to_chat, body, max_tokens_cap=100, system_role="developer")
    _only_translation_error(chat_to_anthropic, body)
    _only_translation_error(chat_to_anthropic, body, default_max_tokens=512)
