"""Structured output in the neutral request: the one shape every codec decodes a client's
output format into and encodes a target's from (2N parts, not N^2; docs/dev/protocols.md F).

The neutral request speaks Chat's vocabulary (neutral.conversation), so the form is Chat's
``response_format``:

- ``{"type": "text"}``: plain text, every protocol's default;
- ``{"type": "json_object"}``: any JSON object (no schema);
- ``{"type": "json_schema", "json_schema": {"schema"?: {...}, "name"?, "strict"?, "description"?}}``:
  a JSON object following a JSON Schema. ``name`` is optional here (Anthropic and Gemini
  have none): an encoder whose protocol requires one adds it as plumbing. ``schema`` is
  optional in Chat and Responses (then any JSON object: a target without that mode drops it).

A schema in the neutral form is JSON Schema with lower-case ``type`` names. A decoder whose
protocol speaks another dialect converts on the way in (``from_openapi``: Gemini's OpenAPI
subset, upper-case types, ``nullable``); an encoder whose target takes only part of JSON
Schema keeps the keywords it takes (``keep_keywords``; the rest dropped, recorded) and, where
the target demands a form (Anthropic: closed objects), converts to it (``close_objects``).
Each function records into the lists it is given, in the paths it is given: a decoder's are
the client's, an encoder's neutral (the translation names them in the client's).

The reply is never touched: the proxy asks for the format and never enforces it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRequest

TEXT, JSON_OBJECT, JSON_SCHEMA = "text", "json_object", "json_schema"
KINDS = (TEXT, JSON_OBJECT, JSON_SCHEMA)
SCHEMA_KEYS = frozenset({"name", "schema", "strict", "description"})  # a json_schema's own keys
PLUMBING_NAME = "response"  # the name given to a schema that came without one, where one is required

# where a JSON Schema holds sub-schemas: a map of them, one of them, or a list of them
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """A neutral output format, read (``read``) or to be written (``neutral``)."""

    kind: str  # TEXT / JSON_OBJECT / JSON_SCHEMA
    schema: dict[str, Any] | None = None  # JSON Schema (JSON_SCHEMA only; None: the client gave none)
    name: str | None = None  # the client's name for it, when its protocol has one
    strict: bool | None = None  # the client's strict flag, when its protocol has one
    description: str | None = None

    def neutral(self) -> dict[str, Any]:
        """The neutral request's ``response_format`` value."""
        if self.kind != JSON_SCHEMA:
            return {"type": self.kind}
        spec: dict[str, Any] = {}
        for key in ("name", "description", "schema", "strict"):
            if (v := getattr(self, key)) is not None:
                spec[key] = v
        return {"type": JSON_SCHEMA, "json_schema": spec}


def _bad(path: str, msg: str) -> InvalidRequest:
    return InvalidRequest(400, f"{path}: {msg}")


def read(value: Any, path: str, dropped: list[str], *, flat: bool = False) -> OutputFormat | None:
    """The neutral ``response_format`` (Chat's shape) as an ``OutputFormat``; with ``flat``, the
    same with json_schema's keys beside ``type`` (Responses' ``text.format``). None for a type no
    protocol here knows (the caller drops it, recorded). Keys outside the shape are recorded in
    ``dropped``; a malformed value is a 400 naming its path under ``path``."""
    if not isinstance(value, dict):
        raise _bad(path, "expected an object")
    kind = value.get("type")
    if kind not in KINDS:
        return None
    if kind != JSON_SCHEMA:
        dropped.extend(f"{path}.{k}" for k in value if k != "type")
        return OutputFormat(kind)
    spec: Any
    if flat:
        spec, sp = value, path
        dropped.extend(f"{sp}.{k}" for k in spec if k not in SCHEMA_KEYS and k != "type")
    else:
        dropped.extend(f"{path}.{k}" for k in value if k not in ("type", "json_schema"))
        spec, sp = value.get("json_schema"), f"{path}.json_schema"
        if not isinstance(spec, dict):
            raise _bad(sp, "required (an object) for type json_schema")
        dropped.extend(f"{sp}.{k}" for k in spec if k not in SCHEMA_KEYS)
    schema, name, strict, desc = (spec.get(k) for k in ("schema", "name", "strict", "description"))
    if schema is not None and not isinstance(schema, dict):
        raise _bad(f"{sp}.schema", "expected a JSON Schema object")
    if name is not None and not isinstance(name, str):
        raise _bad(f"{sp}.name", "expected a string")
    if strict is not None and not isinstance(strict, bool):
        raise _bad(f"{sp}.strict", "expected a boolean")
    if desc is not None and not isinstance(desc, str):
        raise _bad(f"{sp}.description", "expected a string")
    return OutputFormat(JSON_SCHEMA, schema, name, strict, desc)


def _walk(schema: Any, path: str, visit: Callable[[dict[str, Any], str], dict[str, Any]]) -> Any:
    """``schema`` rebuilt bottom-up: every sub-schema (``_SCHEMA_MAPS`` / ``_ONE`` / ``_LISTS``)
    first, then ``visit(node, path)`` on the node with its new sub-schemas. Never mutates."""
    if not isinstance(schema, dict):
        return schema
    node = dict(schema)
    for key in _SCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            node[key] = {k: _walk(v, f"{path}.{key}.{k}", visit) for k, v in node[key].items()}
    for key in _SCHEMA_ONE:
        if isinstance(node.get(key), dict):
            node[key] = _walk(node[key], f"{path}.{key}", visit)
    for key in _SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            node[key] = [_walk(v, f"{path}.{key}[{i}]", visit) for i, v in enumerate(node[key])]
    return visit(node, path)


def from_openapi(schema: dict[str, Any], path: str, converted: list[str], dropped: list[str],
                 own_keywords: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A schema in an OpenAPI-style dialect (Gemini's ``responseSchema``: upper-case ``type``
    names, ``nullable``) as JSON Schema: types lower-cased, ``nullable: true`` as ``"null"``
    among the types; ``own_keywords`` (the dialect's own, no JSON Schema meaning) dropped.
    Each kind of conversion recorded once in ``converted``, each drop in ``dropped``."""
    seen: set[str] = set()

    def note(kind: str, what: str) -> None:
        if kind not in seen:
            seen.add(kind)
            converted.append(f"{path}: {what}")

    def visit(node: dict[str, Any], at: str) -> dict[str, Any]:
        t = node.get("type")
        if isinstance(t, str) and t != t.lower():
            node["type"] = t = t.lower()
            note("type", "upper-case type names as JSON Schema's (OBJECT -> object)")
        elif isinstance(t, list) and any(isinstance(x, str) and x != x.lower() for x in t):
            node["type"] = t = [x.lower() if isinstance(x, str) else x for x in t]
            note("type", "upper-case type names as JSON Schema's (OBJECT -> object)")
        nullable = node.pop("nullable", None)
        if nullable is True and isinstance(t, str):
            node["type"] = [t, "null"]
            note("nullable", "nullable: true as \"null\" among the types")
        elif nullable is not None and not (nullable is True and isinstance(t, list) and "null" in t):
            dropped.append(f"{at}.nullable")
        for k in [k for k in node if k in own_keywords]:
            dropped.append(f"{at}.{k}")
            del node[k]
        return node

    out: dict[str, Any] = _walk(schema, path, visit)
    return out


def keep_keywords(schema: dict[str, Any], takes: Callable[[str, Any], bool], path: str,
                  dropped: list[str]) -> dict[str, Any]:
    """``schema`` with only the keywords a target's dialect takes (``takes(keyword, value)``),
    at every level; each keyword left behind recorded in ``dropped`` by its path. Dropping a
    keyword loosens the schema (never tightens it): the reply can only be freer than asked."""

    def visit(node: dict[str, Any], at: str) -> dict[str, Any]:
        if all(takes(k, v) for k, v in node.items()):
            return node
        dropped.extend(f"{at}.{k}" for k, v in node.items() if not takes(k, v))
        return {k: v for k, v in node.items() if takes(k, v)}

    out: dict[str, Any] = _walk(schema, path, visit)
    return out


def is_object(node: dict[str, Any]) -> bool:
    t = node.get("type")
    return t == "object" or (isinstance(t, list) and "object" in t) or (t is None and "properties" in node)


def close_objects(schema: dict[str, Any], path: str, converted: list[str]) -> dict[str, Any] | None:
    """``schema`` with ``additionalProperties: false`` on every object that says nothing of
    them, for a target whose structured output takes closed objects only (Anthropic); None
    when an object asks for other properties (``true`` or a schema): the target cannot take it.
    Recorded once in ``converted``."""
    opened: list[str] = []
    closed: list[str] = []

    def visit(node: dict[str, Any], at: str) -> dict[str, Any]:
        if not is_object(node):
            return node
        extra = node.get("additionalProperties")
        if extra is None:
            closed.append(at)
            return {**node, "additionalProperties": False}
        if extra is not False:
            opened.append(at)
        return node

    out: dict[str, Any] = _walk(schema, path, visit)
    if opened:
        return None
    if closed:
        converted.append(f"{path}: + additionalProperties: false on {len(closed)} object(s) that said nothing of "
                         "other properties (the target takes closed objects only)")
    return out
