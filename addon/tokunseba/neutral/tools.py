"""The client's own tools behind neutral functions: a declared, two-way encoding (docs/dev/architecture.md
rule 4), not an invention.

The neutral vocabulary has one kind of tool: a function with a flat name whose arguments are
a JSON object. A client protocol may declare tools it has no shape for — Responses'
freeform ``custom`` tools (their input is raw text: Codex's ``exec`` and ``apply_patch``) and
tools grouped in ``namespace``s (Codex's ``additional_tools``, its MCP servers). Its request
decoder writes each as a neutral function:

- a freeform tool is a function with one required string parameter ``input`` (the name
  OpenAI's own JSON variant of ``apply_patch`` uses); a call's input travels as the
  arguments ``{"input": <the input>}`` (``freeform_arguments``);
- a namespaced tool gets a flat name the client protocol's codec chooses (reversible through
  this map, collision-checked there).

and keeps, per neutral name, the tool as the client declared it (``ClientTool``) in
``Conversation.client_tools``. The reply's encoder for that client reads the map back
(``ReplyReport.client_tools``): a freeform call whose arguments are exactly ``{"input":
<string>}`` becomes the client's freeform call with that input byte for byte
(``freeform_input``; streamed, ``FreeformInputStream`` decodes the string as it arrives); any
other arguments are handed back raw as the input and recorded (``unwrap_failed``), never
guessed; a namespaced call gets its namespace and name back.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from .. import jsonc

FREEFORM_PARAM = "input"  # the one string parameter of a freeform tool's function


class ClientTool(NamedTuple):
    """A tool as the client declared it, behind a neutral function name (a tuple: made per
    declared tool on every request, cheaply)."""

    name: str  # the client's name, byte for byte
    namespace: str | None = None  # the namespace it was declared in (None: none)
    freeform: bool = False  # its input is raw text, carried as {"input": <text>}
    # a freeform tool's grammar as declared, (syntax, definition) byte for byte (None: any text):
    # for an endpoint that takes freeform tools as they are (a Chat endpoint's custom tools)
    grammar: tuple[str, str] | None = None


ClientTools = dict[str, ClientTool]  # neutral function name -> the client's tool


def freeform_tools(tools: ClientTools) -> dict[str, ClientTool]:
    """The freeform ones, by neutral function name."""
    return {flat: t for flat, t in tools.items() if t.freeform}


def freeform_parameters(grammar: str | None = None) -> dict[str, Any]:
    """The JSON schema of a freeform tool's function: one required string ``input``; the
    client's grammar text, when it declared one, verbatim as that parameter's description."""
    prop: dict[str, Any] = {"type": "string"}
    if grammar:
        prop["description"] = grammar
    return {"type": "object", "properties": {FREEFORM_PARAM: prop}, "required": [FREEFORM_PARAM],
            "additionalProperties": False}


def freeform_arguments(text: str) -> str:
    """A freeform call's input as the neutral function's arguments."""
    return jsonc.dumps({FREEFORM_PARAM: text})


def freeform_input(arguments: str) -> str | None:
    """The input of a freeform call from its function's arguments: only when they are
    exactly one JSON object ``{"input": <string>}``; None for anything else."""
    try:
        doc = jsonc.loads(arguments)
    except (jsonc.JSONDecodeError, TypeError, ValueError):
        return None
    if type(doc) is dict and len(doc) == 1:
        value = doc.get(FREEFORM_PARAM)
        if type(value) is str:
            return value
    return None


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_PLAIN = re.compile(r'[^"\\]+')
_WS = " \t\r\n"
_OPEN_KEY = '"' + FREEFORM_PARAM + '"'


class FreeformInputStream:
    """The input of a streamed freeform call, decoded from its arguments' JSON text as the
    fragments arrive: ``feed(fragment)`` returns the input text it completed (a string
    escape cut between fragments waits for its end), whatever the split. Only the shape
    ``{"input": "<string>"}`` (whitespace allowed) streams; at the first byte of any other
    shape it stops streaming (``failed``), and the caller takes the final input from the
    whole arguments (``freeform_input``), which alone decides."""

    __slots__ = ("_state", "_head", "_esc", "_high", "failed")

    def __init__(self) -> None:
        self._state = 0  # 0: before the string's opening quote; 1: inside it; 2: after it
        self._head = ""  # the text before the string, until it is known to be {"input": "
        self._esc = ""  # an escape sequence cut by a fragment boundary
        self._high = ""  # a high surrogate waiting for its low half
        self.failed = False

    def feed(self, fragment: str) -> str:
        if self.failed or not fragment:
            return ""
        if self._state == 0:
            self._head += fragment
            rest = self._opening()
            if rest is None:
                return ""
            fragment = rest
        if self._state == 1:
            return self._string(fragment)
        if fragment.strip(_WS + "}"):  # after the string: only whitespace and the closing brace
            self.failed = True
        return ""

    def _opening(self) -> str | None:
        """The text after ``{"input":"`` once the head holds it (None: not yet, or failed)."""
        h = self._head.lstrip(_WS)
        want = ("{", _OPEN_KEY, ":", '"')
        for token in want:
            if not h:
                return None
            if len(h) < len(token):
                if not token.startswith(h):
                    self.failed = True
                return None
            if not h.startswith(token):
                self.failed = True
                return None
            h = h[len(token):].lstrip(_WS) if token != '"' else h[len(token):]
        self._state = 1
        self._head = ""
        return h

    def _string(self, s: str) -> str:
        out: list[str] = []
        if self._esc:
            s = self._esc + s
            self._esc = ""
        i, n = 0, len(s)
        while i < n:
            c = s[i]
            if c == '"':
                self._state = 2
                if s[i + 1:].strip(_WS + "}"):
                    self.failed = True
                break
            if c == "\\":
                if i + 1 >= n:
                    self._esc = s[i:]
                    break
                e = s[i + 1]
                if e == "u":
                    if i + 6 > n:
                        self._esc = s[i:]
                        break
                    try:
                        code = int(s[i + 2:i + 6], 16)
                    except ValueError:
                        self.failed = True
                        break
                    i += 6
                    ch = chr(code)
                    if 0xD800 <= code < 0xDC00:
                        self._high = ch
                        continue
                    if 0xDC00 <= code < 0xE000 and self._high:
                        ch = (self._high + ch).encode("utf-16", "surrogatepass").decode("utf-16")
                    self._high = ""
                    out.append(ch)
                    continue
                if e not in _ESCAPES:
                    self.failed = True
                    break
                out.append(_ESCAPES[e])
                i += 2
                continue
            m = _PLAIN.match(s, i)
            assert m is not None
            out.append(m.group(0))
            i = m.end()
        return "".join(out)
