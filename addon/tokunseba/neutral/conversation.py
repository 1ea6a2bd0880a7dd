"""A request in neutral form: a ``Conversation`` (docs/dev/architecture.md §3), and what a request
translation returns (``RequestTranslation``).

The neutral request is written in the vocabulary of Chat Completions, the common ground of
the protocols here (system / user / assistant / tool turns; text, image and file parts;
function tools; tool calls whose arguments are a JSON string kept verbatim):

- ``model``: str;
- ``messages``: ``{"role": "system" | "user" | "assistant" | "tool", ...}``: system text
  (leading ones first), user content (a string or ``text`` / ``image_url`` / ``file``
  parts), assistant text plus ``tool_calls`` (``{"id", "type": "function", "function":
  {"name", "arguments"}}``, ids byte for byte), ``tool`` results (``tool_call_id``,
  text content), each result directly after the assistant turn that called it;
- ``tools`` (``{"type": "function", "function": {name, description?, parameters?}}``),
  ``tool_choice`` (``auto`` / ``none`` / ``required`` / ``{"type": "function", ...}``),
  ``parallel_tool_calls``;
- options: ``max_completion_tokens``, ``temperature``, ``top_p``, ``stop`` (a list),
  ``stream``.

A decoder (``translate/<protocol>/decode.py``) validates the client's body, writes the
neutral one and records, in the client's own JSON paths, what it left behind (``dropped``),
what it converted and its warnings; ``origin`` maps each neutral part's path (``messages[3]``,
``messages[3].tool_calls[0]``, ``tools[1]``, ``max_completion_tokens`` ...) to the client's
path it came from, so an encoder's own drops and refusals are recorded in the client's paths
too (``client_path``). An encoder writes the target's body from the neutral one, applying
the endpoint's options, and records what the target cannot carry.

Why Chat-shaped and not a tree of new classes: it keeps the field tables proven by the
existing tests, Chat and Responses are near-isomorphic, and everything Anthropic has beyond
it (thinking, cache_control, server tools...) can go to no other protocol anyway. The cost:
a part both ends could carry but Chat cannot (an image inside a tool result, Anthropic ->
Responses) is dropped and recorded.
"""

from __future__ import annotations

from typing import Any

import re
from dataclasses import dataclass, field

from .tools import ClientTools

_PATH_HEAD = re.compile(r"^[A-Za-z_][\w.\[\]]*")


@dataclass(frozen=True)
class Capped:
    """The endpoint's cap (its ``max_tokens``) took the place of the larger number of output
    tokens the client asked for (``asked``), or was sent as the turn's limit where the client
    named none (``asked`` None): a reply that ends on it was cut by the endpoint, not by the
    client's limit (neutral/endpoint_cap.py, turn/cap_note.py)."""

    asked: int | None
    cap: int


@dataclass
class RequestTranslation:
    """A translated request: the target's body and the report of what happened to the input."""

    body: dict[str, Any]  # the translated request body
    dropped: list[str] = field(default_factory=list)  # JSON paths (of the input) left behind
    plumbing: list[str] = field(default_factory=list)  # paths (of the output) added as plumbing
    converted: list[str] = field(default_factory=list)  # values converted or capped, with why
    capped: Capped | None = None  # the endpoint's cap in place of the client's limit (in converted / plumbing)
    warnings: list[str] = field(default_factory=list)
    # False only when a streaming Chat client did not ask stream_options.include_usage
    # (the reply encoder then sends no usage chunk); non-streamed replies always carry usage.
    client_wants_usage: bool = True
    # what restoring provider state did for this endpoint and model (reasoning.state.RestoreReport)
    state_report: object | None = None
    # the client's tools behind neutral function names (neutral/tools.py): what its reply's
    # encoder gives back in the client's own shape (freeform calls, namespaces); empty: none
    client_tools: ClientTools = field(default_factory=dict)


@dataclass
class Conversation(RequestTranslation):
    """A decoded request: ``body`` is the neutral request (see the module docstring)."""

    origin: dict[str, str] = field(default_factory=dict)  # neutral path -> client path
    _sources: list[tuple[dict[str, Any], str]] = field(default_factory=list, repr=False, compare=False)
    _final: bool = field(default=False, repr=False, compare=False)

    def source(self, part: dict[str, Any], path: str) -> dict[str, Any]:
        """Remember the client path of a neutral part while decoding; ``finish_origin``
        turns these into ``origin`` paths once the neutral body is complete."""
        self._sources.append((part, path))
        return part

    def replace_part(self, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """``new`` stands for ``old`` (a copy made after decoding, e.g. with restored provider
        state): the client path of ``old`` carries over. Returns ``new``."""
        if (path := self.source_path(old)) is not None:
            self._sources.append((new, path))
        return new

    def source_path(self, part: dict[str, Any]) -> str | None:
        return next((path for p, path in self._sources if p is part), None)

    def finish_origin(self) -> None:
        """The decoder is done: the neutral body is final. The paths of its parts are
        worked out only if an encoder ever names one (most translations never do)."""
        self._final = True

    def _expand(self) -> None:
        sources, self._sources = self._sources, []  # held until the end: their ids stay unique
        src = {id(p): path for p, path in sources}
        origin = self.origin
        for i, m in enumerate(self.body.get("messages") or ()):
            if not src:
                return  # every recorded part placed
            if (path := src.pop(id(m), None)) is not None:
                origin[f"messages[{i}]"] = path
            for k, tc in enumerate(m.get("tool_calls") or ()):
                if (path := src.pop(id(tc), None)) is not None:
                    origin[f"messages[{i}].tool_calls[{k}]"] = path
        for i, t in enumerate(self.body.get("tools") or () if src else ()):
            if (path := src.pop(id(t), None)) is not None:
                origin[f"tools[{i}]"] = path

    def client_path(self, path: str) -> str:
        """The client's JSON path for a neutral one: the longest recorded prefix replaced
        (identity when the client's protocol is the neutral vocabulary itself)."""
        if self._sources and self._final and "[" in path:
            self._expand()
        origin = self.origin
        if not origin:
            return path
        if path in origin:
            return origin[path]
        for i in range(len(path) - 1, 0, -1):
            if path[i] in ".[" and path[:i] in origin:
                return origin[path[:i]] + path[i:]
        return path

    def client_message(self, message: str) -> str:
        """An encoder's message ``"<neutral path>: why"`` (or ``"<path> -> ..."``) in the client's path."""
        if not self.origin and not self._sources:
            return message  # the client speaks the neutral vocabulary: its paths are these
        m = _PATH_HEAD.match(message)
        if m and message[m.end():m.end() + 1] in (":", " "):
            return self.client_path(m.group(0)) + message[m.end():]
        return message
