"""The field-table runner and the JSON-path validators every request codec uses.

A request codec keeps its field decisions in tables: ``FieldTable`` maps a top-level field to
(action, handler-or-target, note), action in mapped / converted / dropped / refused, and
``run`` applies one (known fields in table order, every unknown field recorded as dropped).
The validators check one value each and raise ``TranslationError(400, "<json path>: ...")``:
bad input is named by its path, before any body exists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import jsonc
from ..errors import InvalidRequest, Refused, TranslationError
from ..neutral import RequestTranslation

JOIN = "\n\n"  # how text blocks become one string (local servers drop array content)


@dataclass(slots=True)
class Options:
    """Endpoint options for the handlers, and what they learn on the way."""

    system_role: str = "system"
    max_tokens_field: str = "max_completion_tokens"
    max_tokens_cap: int | None = None
    include_usage: bool = False  # a Chat client's stream_options.include_usage
    native_custom_tools: bool = False  # a Chat endpoint that takes freeform tools as custom tools


# (the record: a decoder's Conversation or an encoder's RequestTranslation)
Handler = Callable[[Any, str, Any, dict[str, Any], Options], None]
FieldTable = dict[str, tuple[str, Handler | str | None, str]]

# ---------------------------------------------------------------------------------------
# input checks: every failure names the JSON path
# ---------------------------------------------------------------------------------------

JSON_TYPES = ((bool, "boolean"), (int, "number"), (float, "number"), (str, "string"), (list, "array"), (dict, "object"))


def jtype(v: Any) -> str:
    if v is None:
        return "null"
    return next((name for t, name in JSON_TYPES if isinstance(v, t)), type(v).__name__)


def show(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def bad(path: str, msg: str) -> TranslationError:
    return InvalidRequest(400, f"{path}: {msg}")


def at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def obj(v: Any, path: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise bad(path, f"expected an object, got {jtype(v)}")
    return v


def arr(v: Any, path: str) -> list[Any]:
    if not isinstance(v, list):
        raise bad(path, f"expected an array, got {jtype(v)}")
    return v


def string(v: Any, path: str) -> str:
    if not isinstance(v, str):
        raise bad(path, f"expected a string, got {jtype(v)}")
    return v


def boolean(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise bad(path, f"expected a boolean, got {jtype(v)}")
    return v


def integer(v: Any, path: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise bad(path, f"expected an integer, got {jtype(v)}")
    return v


def number(v: Any, path: str) -> int | float:
    if not isinstance(v, int | float) or isinstance(v, bool):
        raise bad(path, f"expected a number, got {jtype(v)}")
    return v


def anything(v: Any, path: str) -> Any:
    return v


# checks whose answer is the value's exact type: a value of that type passes without a call
# and without building its path (a path is only needed to name a failure)
_PASSES: dict[Callable[..., Any], type] = {string: str, obj: dict, arr: list, boolean: bool}


def req(obj: dict[str, Any], key: str, path: str, check: Callable[[Any, str], Any]) -> Any:
    """``obj[key]``, which must be present (not null) and pass ``check``."""
    v = obj.get(key)
    if v is None:
        raise bad(at(path, key), "required")
    if type(v) is _PASSES.get(check) or check is anything:
        return v
    return check(v, at(path, key))


def opt(obj: dict[str, Any], key: str, path: str, check: Callable[[Any, str], Any]) -> Any:
    v = obj.get(key)
    if v is None or type(v) is _PASSES.get(check):
        return v
    return check(v, at(path, key))


def pick(table: dict[str, Any], v: Any, path: str, what: str) -> Any:
    """``table[v]`` for a string ``v``; anything else is a 400 naming the known values."""
    if not isinstance(v, str) or v not in table:
        raise bad(path, f"unknown {what} {show(v)} (expected one of {', '.join(map(repr, table))})")
    return table[v]


def choice(v: Any, names: tuple[str, ...], path: str, what: str) -> str:
    """``v`` when it is one of ``names``; anything else is a 400."""
    if not isinstance(v, str) or v not in names:
        raise bad(path, f"unknown {what} {show(v)} (expected one of {', '.join(map(repr, names))})")
    return v


def extras(rt: RequestTranslation, obj: dict[str, Any], known: frozenset[str], path: str) -> None:
    """Record every key of ``obj`` outside ``known`` as dropped."""
    if obj.keys() <= known:  # the usual case, decided without a Python loop
        return
    extra = obj.keys() - known  # C-level: one extra key (such as "strict") needs no loop either
    if len(extra) == 1:
        (k,) = extra
        rt.dropped.append(f"{path}.{k}" if path else k)
        return
    for k in obj:  # in the object's own order
        if k not in known:
            rt.dropped.append(at(path, k))



def each_part(rt: RequestTranslation, content: list[Any], path: str, table: dict[str, Any], what: str = "content part type") -> list[Any]:
    """Each part of a content list through its handler in ``table`` (by ``type``; an unknown
    type is a 400 naming its path); the handlers' results, those that are not None."""
    out = []
    for k, x in enumerate(arr(content, path)):
        xp = f"{path}[{k}]"
        got = pick(table, obj(x, xp).get("type"), f"{xp}.type", what)(rt, x, xp)
        if got is not None:
            out.append(got)
    return out


def name_within(name: str, path: str, limit: int, target: str) -> str:
    """A tool name the target accepts, untouched; a longer one refuses the turn (renaming it
    would invent a tool: docs/dev/pitfalls.md 20)."""
    if len(name) > limit:
        raise Refused(
            400, f"{path}: tool name {show(name)} has {len(name)} characters; {target} accepts at most {limit}, "
                 "and renaming it would invent a tool")
    return name


def data_url(url: str, path: str) -> tuple[str, str]:
    """``data:<media type>[;params];base64,<data>`` -> (media type, data)."""
    head, comma, data = url.partition(",")
    if not (comma and head.startswith("data:") and head.endswith(";base64")):
        raise bad(path, "expected a URL or a base64 data: URL")
    media_type = head[5:-7].split(";", 1)[0]
    if not media_type:
        raise bad(path, "data: URL without a media type")
    return media_type, data


def check_body(body: Any, who: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequest(400, f"{who} request body must be a JSON object, got {jtype(body)}")
    if body.get("messages") is None:
        raise bad("messages", "required")
    return body


def run(table: FieldTable, checks: dict[str, Callable[[Any, str], Any]], body: dict[str, Any], rt: Any, o: Options,
        spelled: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Apply a field table: known fields in table order (later handlers may read what earlier
    ones wrote: tool_choice needs tools), then every unknown field recorded as dropped.
    ``rt`` is the record (anything with a ``dropped`` list: a Conversation, a RequestTranslation,
    a codec's own decoding state). ``spelled``: where a protocol takes one field under several
    spellings (Gemini: lowerCamel or snake_case), ``body`` keyed as the table is and each key's
    path as the client spelled it (what handlers get and drops name)."""
    out: dict[str, Any] = {}
    for key in [k for k in table if k in body]:  # most rows are absent: skipped in one comprehension
        action, how, _note = table[key]
        value = body[key]
        if value is None:  # null: nothing to carry
            continue
        path = key if spelled is None else spelled[key]
        if action == "mapped":
            out[how] = checks[key](value, path)  # type: ignore[index]
        elif how is None:  # dropped, recorded by name
            rt.dropped.append(path)
        else:  # converted, or dropped with its own record (metadata.user_id)
            how(rt, path, value, out, o)  # type: ignore[operator]
    if not body.keys() <= table.keys():
        rt.dropped.extend([k if spelled is None else spelled[k] for k in body if k not in table])
    return out


def finish_model(rt: RequestTranslation, out: dict[str, Any], model: str | None) -> dict[str, Any]:
    if model is not None:
        asked = out.get("model")
        if asked != model:
            rt.converted.append(f"model -> {model!r} (route/endpoint model; client asked {asked!r})")
            out = {"model": model, **{k: v for k, v in out.items() if k != "model"}}
    if "model" not in out:
        raise bad("model", "required")
    return out


def drop_keys(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: Options) -> None:
    """A dropped object recorded key by key (``metadata.user_id``)."""
    if isinstance(value, dict) and value:
        rt.dropped.extend(f"{key}.{k}" for k in value)
    else:
        rt.dropped.append(key)


CHECKS: dict[str, Callable[[Any, str], Any]] = {"model": string, "temperature": number, "top_p": number, "stream": boolean}


def parse_body(raw: bytes) -> dict[str, Any]:
    """A request body as a dict; 400 when it is not JSON or not a JSON object."""
    try:
        doc = jsonc.loads(raw)
    except jsonc.JSONDecodeError as e:
        raise InvalidRequest(400, f"request body is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise InvalidRequest(400, f"request body must be a JSON object, got {jtype(doc)}")
    return doc
