"""Credentials: which headers and query parameters carry them, what may leave for another
host, and redaction (docs/dev/architecture.md §2 rule 7). The one list every module uses.

- ``is_credential_header`` / ``is_secret_param``: names that hold a credential (known
  gateway names, each protocol's own ``credential_headers`` fact such as ChatGPT-Account-ID,
  and any name containing auth/key/token/cookie/secret/...).
- ``outgoing_headers`` / ``outgoing_query``: a turn leaving for another host carries an
  **allow-list** (``ALLOWED_HEADERS``, and each protocol's ``version_headers`` and
  ``kept_query`` in its facts, each row with its reason); everything else stays behind and its *names* are recorded.
- ``scrub`` / ``redact_text``: credential-like keys and key-shaped text redacted from
  anything written to the ledger or the logs; ``KNOWN_SECRETS`` adds redaction **by value**
  of the endpoints' own keys (registered by the adapter when it loads the rules), so a key
  an upstream echoes back is redacted wherever it shows, whatever its shape.
- ``StreamRedactor``: by-value redaction of a byte stream fed in any split; it holds back
  only a tail that is the start of a known secret (never more than a key's length).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from . import protocols

REDACTED = "<redacted>"

# Header / key names that hold a credential wherever they appear (lower-case, "_" as "-"); a
# protocol's own (ChatGPT-Account-ID, OpenAI-Organization...) are facts of that protocol
# (``credential_headers``), joined in by ``credential_names``.
CREDENTIAL_NAMES = frozenset({
    "authorization", "proxy-authorization", "x-api-key", "api-key", "apikey", "x-goog-api-key",
    "cookie", "set-cookie",
    "cf-aig-authorization", "helicone-auth", "x-portkey-api-key", "x-auth-token",
    "access-token", "refresh-token", "id-token", "token", "secret", "client-secret", "password",
})
_names: list[tuple[int, frozenset[str]]] = []  # (registry generation, the names then)


def credential_names() -> frozenset[str]:
    """Every credential name: ``CREDENTIAL_NAMES`` and each registered protocol's
    ``credential_headers`` (rebuilt when the registry changes)."""
    gen = protocols.generation()
    if not _names or _names[0][0] != gen:
        extra = {_norm(n) for p in protocols.all_protocols() for n in p.credential_headers}
        _names[:] = [(gen, CREDENTIAL_NAMES | extra)]
    return _names[0][1]

# Any name containing one of these counts as a credential (gateway headers, x-…-token, …).
CREDENTIAL_PARTS = ("auth", "key", "token", "cookie", "secret", "passw", "signature", "session", "credential")

# Headers a turn leaving for another host keeps: what any HTTP API request needs.
ALLOWED_HEADERS: dict[str, str] = {
    "host": "set to the endpoint's host by the retarget",
    "content-type": "the body's media type",
    "content-length": "the body's framing",
    "transfer-encoding": "the body's framing",
    "content-encoding": "the body's compression (retargets keep the body's bytes; translations drop it)",
    "accept": "the reply's media type (stream or JSON)",
    "accept-encoding": "the reply's compression",
    "user-agent": "names the client software; no credential",
}
def _norm(name: str) -> str:
    return str(name).lower().replace("_", "-")


def is_credential_header(name: str) -> bool:
    """Whether a header (or JSON key) named ``name`` carries a credential."""
    return _is_credential(name, protocols.generation())


@functools.lru_cache(maxsize=4096)  # the same few header names come with every turn
def _is_credential(name: str, generation: int) -> bool:
    n = _norm(name)
    return n in credential_names() or any(p in n for p in CREDENTIAL_PARTS)


def is_secret_param(name: str) -> bool:
    """Whether a query parameter named ``name`` carries a credential (``key``, ``api_key``,
    ``access_token``, ``x-goog-api-key``, ``sig``…)."""
    n = _norm(name)
    return is_credential_header(n) or n in ("sig", "code", "pass", "pwd")


def outgoing_headers(names: Iterable[str], client: str, target: str, *, translated: bool) -> tuple[set[str], list[str]]:
    """For a turn leaving for another host: (lower-case names it may keep, names that stay
    behind, as the client sent them)."""
    allowed = set(ALLOWED_HEADERS)
    if translated:
        allowed.discard("content-encoding")  # the translated body is written anew, uncompressed
    if client == target:
        allowed |= set(protocols.get(target).version_headers)
    withheld = [n for n in names if n.lower() not in allowed]
    return allowed, list(dict.fromkeys(withheld))


def outgoing_query(url: str, client_path: str, client: str, target: str, *, cross_host: bool) -> tuple[str, list[str]]:
    """The endpoint URL with its own query, plus (same host) the client's other parameters or
    (another host) only the target protocol's own ones when the client speaks it.
    Returns (url, names of the client's parameters left behind)."""
    base, _, own = url.partition("?")
    params = parse_qsl(own, keep_blank_values=True)
    have = {k for k, _ in params}
    kept = protocols.get(target).kept_query if client == target else {}
    withheld: list[str] = []
    for k, v in parse_qsl(client_path.partition("?")[2], keep_blank_values=True):
        if k in have:
            continue
        if cross_host and k not in kept:
            withheld.append(k)
        else:
            params.append((k, v))
    return (f"{base}?{urlencode(params)}" if params else base), list(dict.fromkeys(withheld))


# ---------------------------------------------------------------- redaction by value


class KnownSecrets:
    """The endpoints' own keys (and their header values), redacted by value everywhere."""

    MIN_LEN = 6  # shorter values would redact ordinary text

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values: tuple[str, ...] = ()

    def set(self, values: Iterable[str]) -> None:
        keep = {v for v in values if isinstance(v, str) and len(v) >= self.MIN_LEN}
        with self._lock:
            self.values = tuple(sorted(keep, key=len, reverse=True))  # longest first

    def redact_text(self, s: str) -> str:
        for v in self.values:
            if v in s:
                s = s.replace(v, REDACTED)
        return s

    def redact_bytes(self, b: bytes) -> bytes:
        for v in self.values:
            vb = v.encode()
            if vb in b:
                b = b.replace(vb, REDACTED.encode())
        return b

    def __bool__(self) -> bool:
        return bool(self.values)


KNOWN_SECRETS = KnownSecrets()


def endpoint_keys(endpoints: Iterable[Any], env: Mapping[str, str]) -> set[str]:
    """The keys the rules' endpoints would send (their ``key_env`` values)."""
    return {env[e.key_env] for e in endpoints if getattr(e, "key_env", None) and env.get(e.key_env)}


class StreamRedactor:
    """By-value redaction of a byte stream, whatever its split: ``feed`` returns what is safe
    to send now, holding back at most a tail that could be the start of a secret."""

    def __init__(self, values: Iterable[str]) -> None:
        self.values = [v.encode() for v in values if v]
        self.held = b""

    def feed(self, data: bytes) -> bytes:
        buf = self.held + data
        for v in self.values:
            buf = buf.replace(v, REDACTED.encode())
        keep = 0
        for v in self.values:
            for n in range(min(len(v) - 1, len(buf)), 0, -1):
                if buf.endswith(v[:n]):
                    keep = max(keep, n)
                    break
        self.held = buf[len(buf) - keep:] if keep else b""
        return buf[: len(buf) - keep] if keep else buf

    def close(self) -> bytes:
        out, self.held = self.held, b""
        return out


# ---------------------------------------------------------------- redaction by pattern

_PARAM_NAMES = r"(?:key|api[_-]?key|token|access[_-]token|refresh[_-]token|id[_-]token|auth|secret|password|sig|signature|x-goog-api-key)"
# Key-like text inside any string (error messages, paths with ?key=..., traces): a
# prefix that is kept (group 1..3) and the secret after it, or a whole key-shaped token.
SECRET_TEXT = re.compile(
    r"(?i)(\b(?:set-)?cookie[\"']?\s*(?:[:=]|\bis\b)\s*[\"']?)[^\"'\r\n]+"
    r"|(\b(?:proxy-)?(?:authorization|x-api-key|api-key|x-goog-api-key|x-auth-token|helicone-auth"
    r"|cf-aig-authorization|x-portkey-api-key|x-[a-z0-9-]*(?:token|key|auth|secret|signature))[\"']?"
    r"\s*(?:[:=]|\bis\b)\s*[\"']?)(?:(?:bearer|basic)\s+)?[^\s\"',;&#]+"
    r"|(\bbearer\s+|[?&]" + _PARAM_NAMES + r"=)[^\s\"',;&#]+"
    r"|\bsk-ant-[A-Za-z0-9_\-]{8,}"
    r"|\bsk-[A-Za-z0-9_\-]{16,}"
    r"|\bAIza[0-9A-Za-z_\-]{20,}"
    r"|(://[^\s:/@\"'?#]*:)[^\s@/\"'?#]+(?=@)"  # a connection URL's user:PASSWORD@
    r"|(\bpassword\s*=\s*)[^\s\"',;&#]+"  # libpq's key=value password
)


# What every match of SECRET_TEXT contains, so that text holding none of it skips the regex
# (which tries its every branch at every position: ~0.3 us a character, 50-90 us for a console
# line). Each branch of SECRET_TEXT contains one of these words (case-insensitive): cookie;
# authorization, helicone-auth, x-auth-token -> auth; *-key, api[_-]?key -> key; secret;
# sig, signature -> sig; bearer; sk-ant-, sk- -> sk-; AIza -> aiza; a URL's :// ; password;
# and "token" only where SECRET_TEXT can match it: followed by = (?token=) or, as a header
# name (x-...-token), by an optional quote, blanks and : = or "is" (_TOKEN_SET). Looked for in
# s.lower(), which is exact: the only characters that (?i) equates with an ASCII letter are
# ASCII and these four (every code point checked by tests/test_credentials.py), and text
# with any of them goes to the regex; without them s.lower() keeps every position (only
# U+0130 lowercases to two characters) and lowers exactly the letters (?i) folds.
_SECRET_WORDS = ("cookie", "auth", "key", "secret", "sig", "bearer", "sk-", "aiza", "://", "password")
_TOKEN_SET = re.compile(r"""token["']?\s*(?:[:=]|is)""")  # searched in the lowered text
_FOLDS_TO_ASCII = re.compile("[\u0130\u0131\u017f\u212a]")  # İ ı ſ K (Kelvin)


def may_hold_secret_text(s: str) -> bool:
    """False only where ``SECRET_TEXT`` cannot match ``s`` (a necessary condition, cheap)."""
    if not s.isascii() and _FOLDS_TO_ASCII.search(s) is not None:
        return True
    low = s.lower()
    for word in _SECRET_WORDS:
        if word in low:
            return True
    return "token" in low and _TOKEN_SET.search(low) is not None


def _redact_match(m: re.Match[str]) -> str:
    return next((g for g in m.groups() if g), "") + REDACTED


def redact_text(s: str) -> str:
    """Key-shaped text and known endpoint keys in ``s`` replaced by ``<redacted>``."""
    if may_hold_secret_text(s):
        s = SECRET_TEXT.sub(_redact_match, s)
    return KNOWN_SECRETS.redact_text(s)


def split_url_password(url: str) -> tuple[str, str | None]:
    """A connection URL (``postgresql://user:pw@host/db?password=…``) without its password,
    and the password (percent-decoded; None when it holds none)."""
    parts = urlsplit(url)
    password = None
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        user, _, pw = userinfo.partition(":")
        password, netloc = unquote(pw), f"{user}@{hostport}"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if k != "password"]
    if len(kept) != len(pairs):
        password = next(v for k, v in pairs if k == "password")
    query = urlencode(kept) if len(kept) != len(pairs) else parts.query
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)), password


def redact_url(url: str) -> str:
    """``url`` as it may be shown: its password (if any) replaced by ``<redacted>``."""
    clean, password = split_url_password(url)
    return clean if password is None else redact_text(url)


def redact_query(url: str) -> str:
    """``url`` (or a path) with the values of credential-like query parameters redacted."""
    base, sep, query = url.partition("?")
    if not sep:
        return KNOWN_SECRETS.redact_text(url)
    pairs = [(k, REDACTED if is_secret_param(k) else v) for k, v in parse_qsl(query, keep_blank_values=True)]
    return KNOWN_SECRETS.redact_text(base + "?" + urlencode(pairs, safe="<>"))


def _secret_key(key: str, in_headers: bool) -> bool:
    k = _norm(key)
    if k in credential_names() or k.endswith("-token") or k.endswith("-api-key"):
        return True
    return in_headers and is_credential_header(k)


def scrub(obj: Any, in_headers: bool = False) -> Any:
    """A copy of ``obj`` with credential-like keys' values, key-like strings and known
    endpoint keys redacted.

    Header collections (the value of any key ending in ``headers``) may be dicts or lists
    of ``[name, value]`` pairs; there, any credential-like name counts (``is_credential_header``).
    """
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            ks = str(k)
            if _secret_key(ks, in_headers):
                out[k] = REDACTED
            else:
                out[k] = scrub(v, in_headers=_norm(ks).endswith("headers"))
        return out
    if isinstance(obj, (list, tuple)):
        if in_headers and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in obj):
            return [[n, REDACTED if _secret_key(str(n), True) else scrub(v)] for n, v in obj]
        return [scrub(v, in_headers) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, bytes):
        return scrub(obj.decode("utf-8", "replace"))
    return obj


class RedactingFilter(logging.Filter):
    """A logging filter that redacts key-shaped text and known endpoint keys from a record's
    message (formatted once here, so arguments are covered too)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:
            return True
        clean = redact_text(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        return True
