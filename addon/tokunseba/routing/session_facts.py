"""Who is talking: a request's session, agent, background flag and client, read from what
the client itself sends (pure; the client facts are in protocols/clients.py).

``speaker(protocol, headers, body)`` never raises and never trusts its input: every value
taken from a header or body is bounded (``MAX_*`` of protocols/clients.py; a longer one
keeps its start and a hash of the whole, so two long values stay apart) and escaped
(anything outside printable ASCII becomes ``\\xNN`` / ``\\uNNNN``); an empty or missing
value counts as not sent. What a client cannot say stays None, and rules then do not match
on it (design: never guess).

- session: Claude Code's ``X-Claude-Code-Session-Id``; Codex's ``prompt_cache_key`` (else
  ``client_metadata.session_id``, else its ``session-id`` / ``thread-id`` headers); for every
  other client a *fingerprint* of the conversation's start, marked as such
  (``session_fingerprint``): ``fp-`` + 16 hex digits of a hash of the client's name, the
  protocol and the text of the first user message(s) before the first reply. Every turn of a
  conversation resends that start, so its turns share the fingerprint; two conversations
  that open with the same text from the same client share it too (a fingerprint, not an id).
- agent: ``main`` / ``subagent`` (with ``agent_id``) where the client says (Claude Code,
  Codex); else None.
- background: Claude Code only (``x-app: cli-bg``, or a call that declares no tools: a
  side query such as the session title); else None.
- client name and version: from the user-agent's first product token.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from .. import jsonc, protocols
from ..protocols import clients as c


@dataclass(frozen=True)
class Speaker:
    """Who is talking in one request (None: the client does not say)."""

    client: str | None = None
    client_version: str | None = None
    session: str | None = None
    session_fingerprint: bool = False  # session is a fingerprint of the conversation's start, not the client's id
    session_from: str | None = None  # where the session came from, e.g. "header x-claude-code-session-id"
    agent: str | None = None  # "main" | "subagent"
    agent_id: str | None = None
    background: bool | None = None
    background_why: str | None = None

    @property
    def own_session(self) -> str | None:
        """The session the client itself sent (None for a fingerprint): read without hashing."""
        return None if self.session_fingerprint else self.session

    def ledger_fields(self, later: Callable[[Callable[[], Any]], Any] | None = None) -> dict[str, Any]:
        """The ledger's per-turn columns (ledger.TURN_FIELDS). ``later`` (ledger.Later): wraps a
        value not computed yet (a fingerprint), so that the ledger's writer computes it."""
        return {"session_id": self.session, "session_fingerprint": int(self.session_fingerprint)
                if self.session is not None else None,
                "agent": self.agent, "agent_id": self.agent_id,
                "background": None if self.background is None else int(self.background),
                "client_name": self.client, "client_version": self.client_version}


class _Fingerprinted(Speaker):
    """A ``Speaker`` whose session is the fingerprint of the conversation's start, hashed when
    first read (``session``), not when the request is read: a turn no rule asks about the
    session of is not hashed on the event loop (the ledger's writer hashes it for the record,
    ``ledger_fields(later)``). The opening texts are taken when the request is read (strings:
    nothing changes them), so the value is the one an eager read would give."""

    _FINGERPRINT_FIELDS = ("session", "session_fingerprint", "session_from")
    _opening: tuple[str | None, str, list[str]]  # (client, protocol, opening texts): what is hashed

    def __init__(self, base: Speaker, client: str | None, protocol: str, texts: list[str]) -> None:  # noqa: D107
        d = self.__dict__  # as object.__setattr__ per field would (a frozen dataclass), in one step
        for name in _UNHASHED_FIELDS:
            d[name] = getattr(base, name)
        d["_opening"] = (client, protocol, texts)

    @functools.cached_property  # written into the instance's __dict__: allowed on a frozen dataclass
    def session(self) -> str | None:
        return _digest(*self._opening)

    session_fingerprint = property(lambda self: True)
    session_from = property(lambda self: FINGERPRINT_FROM)

    def __eq__(self, other: object) -> bool:  # equal to the eager ``Speaker`` of the same request
        return isinstance(other, Speaker) and all(getattr(self, f.name) == getattr(other, f.name) for f in fields(Speaker))

    __hash__ = Speaker.__hash__

    def __repr__(self) -> str:
        return "Speaker" + Speaker.__repr__(self).removeprefix(type(self).__qualname__)

    def ledger_fields(self, later: Callable[[Callable[[], Any]], Any] | None = None) -> dict[str, Any]:
        if later is None or "session" in self.__dict__:  # asked for now, or hashed already
            return Speaker.ledger_fields(self)
        unhashed = Speaker(**{name: getattr(self, name) for name in _UNHASHED_FIELDS})
        return {**Speaker.ledger_fields(unhashed), "session_id": later(lambda: self.session), "session_fingerprint": 1}


FINGERPRINT_FROM = "fingerprint of the conversation's start"
# a Speaker's fields a fingerprint leaves as they are (named once: ``fields()`` builds them per call)
_UNHASHED_FIELDS = tuple(f.name for f in fields(Speaker) if f.name not in _Fingerprinted._FINGERPRINT_FIELDS)


# ---------------------------------------------------------------- bounding and escaping


def clean(value: Any, limit: int) -> str | None:
    """``value`` as a bounded, escaped string; None when absent or empty."""
    if value is None or isinstance(value, (dict, list, bool)):
        return None
    text = value if isinstance(value, str) else str(value)
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
    text = text.strip()
    if not text:
        return None
    whole = text
    if len(text) > limit * 4:  # escaping can at most quadruple; cut before escaping a huge value
        text = text[: limit * 4]
    # printable ASCII (the usual value) is recorded as it is: no escape to look for
    out = text if text.isascii() and text.isprintable() else "".join(map(_escaped, text))
    if len(out) > limit or len(whole) > len(text):
        digest = hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        out = out[: limit - 14] + "…#" + digest
    return out


def _escaped(ch: str) -> str:
    """One character as it is recorded: printable ASCII as is, else an escape. A byte that was
    not UTF-8 (carried as a lone surrogate, Python's surrogateescape) is shown as that byte."""
    o = ord(ch)
    if 0x20 <= o <= 0x7E:
        return ch
    if 0xDC80 <= o <= 0xDCFF:
        return f"\\x{o - 0xDC00:02x}"
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return headers.get(name)


# ---------------------------------------------------------------- client


@functools.lru_cache(maxsize=256)  # per turn (twice), and the user-agents a proxy sees are few
def client_of(user_agent: str | None) -> tuple[str | None, str | None]:
    """(name, version) from a user-agent's first product token; known clients by their own name."""
    if not user_agent:
        return None, None
    m = c.USER_AGENT_RX.match(user_agent[:512])
    if m is None:
        return clean(user_agent.split(" ", 1)[0], c.MAX_NAME_CHARS), None
    token = m.group("name").lower()
    name = c.CLIENT_ALIASES.get(token) or next((n for p, n in c.CLIENT_PREFIXES if token.startswith(p)), token)
    return clean(name, c.MAX_NAME_CHARS), clean(m.group("version"), c.MAX_VERSION_CHARS)


# ---------------------------------------------------------------- the conversation's start

# protocol -> (key of the turn list, role of a message, text of a message's parts)
_USER_ROLES = {"user"}
_SKIP_ROLES = {"system", "developer"}  # instructions, not the conversation's start


def _d(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _texts(content: Any, part_key: str = "text") -> list[str]:
    if isinstance(content, str):
        return [content]
    out = []
    for p in content if isinstance(content, list) else ():
        if isinstance(p, dict) and isinstance(p.get(part_key), str) and not p.get("thought"):
            out.append(p[part_key])
    return out


def opening_texts(protocol: str, body: Any) -> list[str]:
    """The text of the user message(s) that open the conversation: every user message before
    the first reply (instructions skipped). Empty when there is none."""
    body = _d(body)
    facts = protocols.find(protocol)
    if facts is None or facts.rule_shape is None:
        return []
    shape = facts.rule_shape  # where the client protocol keeps its turns, their parts and roles
    items, content_key, role_of = body.get(shape.turns), shape.parts, shape.role_of
    if isinstance(items, str):  # Responses `input` may be a bare string
        return [items]
    out: list[str] = []
    for m in items if isinstance(items, list) else ():
        if not isinstance(m, dict):
            continue
        role = role_of(m)
        if role in _SKIP_ROLES:
            continue
        if role not in _USER_ROLES:
            break
        out += _texts(m.get(content_key))
    return [t for t in out if t]


def fingerprint(client: str | None, protocol: str, body: Any) -> str | None:
    """``fp-`` + 16 hex digits naming the conversation's start; None without one."""
    texts = opening_texts(protocol, body)
    return _digest(client, protocol, texts) if texts else None


def _digest(client: str | None, protocol: str, texts: list[str]) -> str:
    h = hashlib.sha256(jsonc.dumpb([client or "", protocol, texts]))  # the same bytes, without a str between
    return "fp-" + h.hexdigest()[:16]


# ---------------------------------------------------------------- per client


def _json_object(text: Any) -> dict:
    if isinstance(text, dict):
        return text
    if not isinstance(text, str) or len(text) > 64 * 1024:
        return {}
    try:
        v = jsonc.loads(text)
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def _claude_code(headers: Mapping[str, str], body: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if sid := clean(_header(headers, c.CC_SESSION_HEADER), c.MAX_SESSION_CHARS):
        out.update(session=sid, session_from=f"header {c.CC_SESSION_HEADER}")
    sub = _header(headers, c.CC_AGENT_HEADER) is not None  # present, even empty: a subagent's call
    agent_id = clean(_header(headers, c.CC_AGENT_HEADER), c.MAX_AGENT_CHARS)
    out.update(agent="subagent" if sub else "main", agent_id=agent_id)
    app = (_header(headers, c.CC_APP_HEADER) or "").strip().lower()
    if app == c.CC_APP_BACKGROUND:
        out.update(background=True, background_why=f"{c.CC_APP_HEADER}: {c.CC_APP_BACKGROUND}")
    elif not sub and isinstance(body.get("tools", []), list) and not body.get("tools"):
        out.update(background=True, background_why="declares no tools (a side query)")
    else:
        out.update(background=False, background_why=f"{c.CC_APP_HEADER}: {app or '-'}, declares tools")
    return out


def _codex(headers: Mapping[str, str], body: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    meta = _d(body.get(c.CODEX_METADATA_KEY))
    for where, value in ((f"body {c.CODEX_SESSION_KEY}", body.get(c.CODEX_SESSION_KEY)),
                         (f"body {c.CODEX_METADATA_KEY}.session_id", meta.get("session_id")),
                         *((f"header {h}", _header(headers, h)) for h in c.CODEX_SESSION_HEADERS)):
        if sid := clean(value, c.MAX_SESSION_CHARS):
            out.update(session=sid, session_from=where)
            break
    turn_meta = _json_object(_header(headers, c.CODEX_TURN_METADATA_HEADER) or meta.get(c.CODEX_TURN_METADATA_HEADER))
    name = clean(turn_meta.get("agent_name"), c.MAX_AGENT_CHARS)
    if name in c.CODEX_MAIN_AGENTS:
        out.update(agent="main")
    elif name:
        out.update(agent="subagent", agent_id=name)
    elif _header(headers, c.CODEX_SUBAGENT_HEADER) is not None:
        out.update(agent="subagent", agent_id=clean(_header(headers, c.CODEX_SUBAGENT_HEADER), c.MAX_AGENT_CHARS))
    return out


def speaker(protocol: str, headers: Mapping[str, str], body: Any, *, lazy: bool = False) -> Speaker:
    """Who is talking in one request. ``headers`` with lower-case names. Never raises.
    ``lazy``: a fingerprint session is hashed when first read (``_Fingerprinted``), not now."""
    try:
        return _speaker(protocol, headers, _d(body), lazy)
    except Exception:  # a reader bug must never break a turn: the turn just says nothing
        return Speaker()


def _speaker(protocol: str, headers: Mapping[str, str], body: dict, lazy: bool = False) -> Speaker:
    name, version = client_of(_header(headers, "user-agent"))
    said: dict[str, Any] = {}
    if name == c.CC_CLIENT or _header(headers, c.CC_SESSION_HEADER) is not None:
        name = name if name == c.CC_CLIENT else name or c.CC_CLIENT
        said = _claude_code(headers, body)
    elif name == c.CODEX_CLIENT or c.CODEX_SESSION_KEY in body or _header(headers, c.CODEX_TURN_METADATA_HEADER):
        said = _codex(headers, body)
    if "session" not in said and (texts := opening_texts(protocol, body)):
        if lazy:
            return _Fingerprinted(Speaker(client=name, client_version=version, **said), name, protocol, texts)
        said.update(session=_digest(name, protocol, texts), session_fingerprint=True, session_from=FINGERPRINT_FROM)
    return Speaker(client=name, client_version=version, **said)
