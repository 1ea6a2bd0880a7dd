"""Usage exactly as reported, and its conversion between protocols (docs/protocols.md E.4).

Part of the neutral model: every codec reads and writes usage through it.

A ``Usage`` holds the upstream's own usage object untouched plus how its numbers count (its
``counting`` convention: Responses counts as Chat). Conversions copy numbers and re-base only
where definitions differ:
OpenAI ``prompt_tokens`` includes cached tokens, Anthropic ``input_tokens`` does not;
Gemini ``promptTokenCount`` includes ``cachedContentTokenCount`` and ``candidatesTokenCount``
excludes ``thoughtsTokenCount`` (billed as output), ``toolUsePromptTokenCount`` is input
outside ``promptTokenCount`` (docs/protocols.md D.6).
A field the upstream did not report stays absent: never zero-filled, never estimated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ANTHROPIC = "anthropic"
OPENAI = "openai"  # Chat Completions semantics (Responses shares them)
GEMINI = "gemini"  # usageMetadata semantics
# the counting conventions whose input count includes the cached tokens (Anthropic's does not)
INPUT_INCLUDES_CACHED = frozenset({OPENAI, GEMINI})


def _sum(base: int | None, extra: int | None) -> int | None:
    """``base + extra`` of reported numbers (an unreported ``extra`` adds nothing); None when
    the base was not reported."""
    return None if base is None else base + (extra or 0)


def _int(v: Any) -> int | None:
    """A reported count: an integer (never a bool); None for anything else."""
    return v if type(v) is int or (isinstance(v, int) and not isinstance(v, bool)) else None


def _first(*values: Any) -> int | None:
    """The first integer among ``values`` (a field reported under one of several names)."""
    for v in values:
        if type(v) is int or (isinstance(v, int) and not isinstance(v, bool)):
            return v
    return None


def _plain_gemini(r: dict[str, Any]) -> tuple[int, int] | None:
    """(promptTokenCount, candidatesTokenCount) of a usageMetadata that reports both and no
    cache, thoughts or tool-use prompt (null counts as not reported); None otherwise."""
    get = r.get
    if get("cachedContentTokenCount") is None and get("thoughtsTokenCount") is None \
            and get("toolUsePromptTokenCount") is None and type(p := get("promptTokenCount")) is int \
            and type(c := get("candidatesTokenCount")) is int:
        return p, c
    return None


_NO_OBJ: dict[str, Any] = {}  # read only: what _obj gives for a missing sub-object


def _obj(r: dict[str, Any], key: str) -> dict[str, Any]:
    v = r.get(key)
    return v if isinstance(v, dict) else _NO_OBJ


@dataclass(frozen=True)
class Usage:
    counting: str  # how its numbers count: ANTHROPIC, OPENAI or GEMINI (not which protocol sent it)
    reported: dict[str, Any]  # the upstream's usage object, as it came

    # ---- the numbers as the upstream named and counted them (for the ledger) ----
    def fields(self) -> dict[str, int | None]:
        """input / output / cache read / cache write / reasoning, in the upstream's own
        counting (OpenAI input includes cached tokens; Anthropic input does not)."""
        r = self.reported
        if self.counting == GEMINI:
            return {
                "input": _int(r.get("promptTokenCount")),  # includes the cached tokens
                "output": _int(r.get("candidatesTokenCount")),  # excludes the thoughts
                "cache_read": _int(r.get("cachedContentTokenCount")),
                "cache_write": None,
                "reasoning": _int(r.get("thoughtsTokenCount")),
            }
        if self.counting == ANTHROPIC:
            otd = _o if isinstance(_o := r.get("output_tokens_details"), dict) else {}
            return {
                "input": _int(r.get("input_tokens")),
                "output": _int(r.get("output_tokens")),
                "cache_read": _int(r.get("cache_read_input_tokens")),
                "cache_write": _int(r.get("cache_creation_input_tokens")),
                "reasoning": _int(otd.get("thinking_tokens")),
            }
        get = r.get
        inp, out = get("prompt_tokens"), get("completion_tokens")
        if type(inp) is int and type(out) is int:  # Chat names: the general case's answer, sooner
            if len(r) == 3 and "total_tokens" in r:  # the plainest (llama.cpp, vLLM, Ollama)
                return {"input": inp, "output": out, "cache_read": None, "cache_write": None, "reasoning": None}
            if "input_tokens_details" not in r and "output_tokens_details" not in r \
                    and "cache_read_input_tokens" not in r and "cache_creation_input_tokens" not in r:
                ptd, ctd = get("prompt_tokens_details"), get("completion_tokens_details")
                return {"input": inp, "output": out,
                        "cache_read": _int(ptd.get("cached_tokens")) if isinstance(ptd, dict) else None,
                        "cache_write": _int(ptd.get("cache_write_tokens")) if isinstance(ptd, dict) else None,
                        "reasoning": _int(ctd.get("reasoning_tokens")) if isinstance(ctd, dict) else None}
        ptd, ctd = _obj(r, "prompt_tokens_details"), _obj(r, "completion_tokens_details")
        # Responses API names (input_tokens/output_tokens, *_details) share Chat semantics;
        # OpenAI-compatible servers for Anthropic-backed models (LiteLLM...) also report the cache
        # under Anthropic's names at the top, counted inside prompt_tokens as OpenAI counts
        itd, otd = _obj(r, "input_tokens_details"), _obj(r, "output_tokens_details")
        inp = _first(r.get("prompt_tokens"), r.get("input_tokens"))
        out = _first(r.get("completion_tokens"), r.get("output_tokens"))
        cr = _first(ptd.get("cached_tokens"), itd.get("cached_tokens"), r.get("cache_read_input_tokens"))
        cw = _first(ptd.get("cache_write_tokens"), itd.get("cache_write_tokens"), r.get("cache_creation_input_tokens"))
        rs = _first(ctd.get("reasoning_tokens"), otd.get("reasoning_tokens"))
        return {"input": inp, "output": out, "cache_read": cr, "cache_write": cw, "reasoning": rs}

    def plain(self) -> tuple[int, int] | None:
        """(input, output) of a report of those two numbers alone, on which every counting
        agrees: a Chat usage of prompt, completion and total only (llama.cpp, vLLM, Ollama), a
        Gemini usageMetadata without cache, thoughts or tool-use prompt (null is not reported).
        None for any other report (conversions then take their general path)."""
        r = self.reported
        if self.counting == OPENAI:
            if len(r) == 3 and type(i := r.get("prompt_tokens")) is int \
                    and type(o := r.get("completion_tokens")) is int and "total_tokens" in r:
                return i, o
            return None
        return _plain_gemini(r) if self.counting == GEMINI else None

    # ---- conversions ----
    def openai_fields(self) -> dict[str, int | None]:
        """``fields()`` of the Chat usage object a client is sent (``to_openai()``), without
        building it: the numbers a Chat or Responses client sees (input includes the cached
        tokens; output includes the reasoning)."""
        if self.counting == OPENAI:
            return self.fields()  # to_openai keeps its numbers (a copy, or Chat names for Responses ones)
        if self.counting == GEMINI:
            if (plain := _plain_gemini(self.reported)) is not None:
                return {"input": plain[0], "output": plain[1], "cache_read": None, "cache_write": None,
                        "reasoning": None}
            r = self.reported
            cached, thoughts = _int(r.get("cachedContentTokenCount")), _int(r.get("thoughtsTokenCount"))
            return {"input": _sum(_int(r.get("promptTokenCount")), _int(r.get("toolUsePromptTokenCount"))),
                    "output": _sum(_int(r.get("candidatesTokenCount")), thoughts),
                    "cache_read": cached, "cache_write": None, "reasoning": thoughts}
        f = self.fields()  # Anthropic: its input excludes the cache, OpenAI's includes it
        if f["input"] is not None:
            f["input"] += (f["cache_read"] or 0) + (f["cache_write"] or 0)
        return f

    def to_anthropic(self) -> dict[str, Any]:
        """The Anthropic usage object a client sees (only reported fields)."""
        if self.counting == ANTHROPIC:
            return dict(self.reported)
        if self.counting == GEMINI:
            return self._gemini_to_anthropic()
        r = self.reported
        if type(inp := r.get("prompt_tokens")) is int and type(outp := r.get("completion_tokens")) is int \
                and len(r) <= 3 and "total_tokens" in r:
            # the plainest Chat usage (prompt, completion, total; no cache, no reasoning): as below
            return {"input_tokens": max(inp, 0), "output_tokens": outp}
        f = self.fields()
        out: dict[str, Any] = {}
        if f["input"] is not None:
            uncached = f["input"] - (f["cache_read"] or 0) - (f["cache_write"] or 0)
            out["input_tokens"] = max(uncached, 0)
        if f["cache_write"] is not None:
            out["cache_creation_input_tokens"] = f["cache_write"]
        if f["cache_read"] is not None:
            out["cache_read_input_tokens"] = f["cache_read"]
        if f["output"] is not None:
            out["output_tokens"] = f["output"]
        if f["reasoning"] is not None:
            out["output_tokens_details"] = {"thinking_tokens": f["reasoning"]}
        return out

    def to_openai(self) -> dict[str, Any]:
        """The Chat Completions usage object a client sees (only reported fields): an OpenAI
        upstream's own object as it came; a Responses one renamed (same definitions); an
        Anthropic one re-based (its input excludes cached tokens)."""
        r = self.reported
        if self.counting == OPENAI and ("prompt_tokens" in r or "completion_tokens" in r
                                        or not ("input_tokens" in r or "output_tokens" in r)):
            return dict(r)
        if self.counting == GEMINI:
            return self._gemini_to_openai()
        f = self.fields()
        out: dict[str, Any] = {}
        if f["input"] is not None:
            cached = 0 if self.counting == OPENAI else (f["cache_read"] or 0) + (f["cache_write"] or 0)
            out["prompt_tokens"] = f["input"] + cached
        if f["output"] is not None:
            out["completion_tokens"] = f["output"]
        if self.counting == OPENAI and _int(r.get("total_tokens")) is not None:
            out["total_tokens"] = r["total_tokens"]  # as reported
        elif "prompt_tokens" in out and "completion_tokens" in out:
            out["total_tokens"] = out["prompt_tokens"] + out["completion_tokens"]  # arithmetic
        ptd: dict[str, int] = {}
        if f["cache_read"] is not None:
            ptd["cached_tokens"] = f["cache_read"]
        if f["cache_write"] is not None:
            ptd["cache_write_tokens"] = f["cache_write"]
        if ptd:
            out["prompt_tokens_details"] = ptd
        if f["reasoning"] is not None:
            out["completion_tokens_details"] = {"reasoning_tokens": f["reasoning"]}
        return out

    def to_gemini(self) -> dict[str, Any]:
        """The Gemini usageMetadata a client sees (only reported fields; docs/protocols.md D.6):
        promptTokenCount includes cached (and Anthropic's cache writes), the reasoning part of
        the output goes to thoughtsTokenCount, totalTokenCount is the reported total or the
        arithmetic sum of what was reported."""
        if self.counting == GEMINI:
            return dict(self.reported)
        f = self.fields()
        out: dict[str, Any] = {}
        prompt = f["input"]
        if prompt is not None and self.counting == ANTHROPIC:
            prompt += (f["cache_read"] or 0) + (f["cache_write"] or 0)
        if prompt is not None:
            out["promptTokenCount"] = prompt
        if f["output"] is not None:
            out["candidatesTokenCount"] = f["output"] - (f["reasoning"] or 0)
        if f["cache_read"] is not None:
            out["cachedContentTokenCount"] = f["cache_read"]
        if f["reasoning"] is not None:
            out["thoughtsTokenCount"] = f["reasoning"]
        total = _int(self.reported.get("total_tokens")) if self.counting == OPENAI else None
        if total is None and prompt is not None and f["output"] is not None:
            total = prompt + f["output"]  # arithmetic on reported numbers
        if total is not None:
            out["totalTokenCount"] = total
        return out

    def _gemini_to_anthropic(self) -> dict[str, Any]:
        r = self.reported
        if (plain := _plain_gemini(r)) is not None:  # as below, sooner
            return {"input_tokens": max(plain[0], 0), "output_tokens": plain[1]}
        prompt, cached = _int(r.get("promptTokenCount")), _int(r.get("cachedContentTokenCount"))
        tool, thoughts = _int(r.get("toolUsePromptTokenCount")), _int(r.get("thoughtsTokenCount"))
        out: dict[str, Any] = {}
        if prompt is not None:
            out["input_tokens"] = max(prompt - (cached or 0), 0) + (tool or 0)
        if cached is not None:
            out["cache_read_input_tokens"] = cached
        output = _sum(_int(r.get("candidatesTokenCount")), thoughts)
        if output is not None:
            out["output_tokens"] = output
        return out

    def _gemini_to_openai(self) -> dict[str, Any]:
        r = self.reported
        out: dict[str, Any]
        if (plain := _plain_gemini(r)) is not None:  # as below, sooner
            out = {"prompt_tokens": plain[0], "completion_tokens": plain[1]}
            if (total := _int(r.get("totalTokenCount"))) is not None:
                out["total_tokens"] = total
            return out
        cached, thoughts = _int(r.get("cachedContentTokenCount")), _int(r.get("thoughtsTokenCount"))
        out = {}
        prompt = _sum(_int(r.get("promptTokenCount")), _int(r.get("toolUsePromptTokenCount")))
        if prompt is not None:
            out["prompt_tokens"] = prompt
        completion = _sum(_int(r.get("candidatesTokenCount")), thoughts)
        if completion is not None:
            out["completion_tokens"] = completion
        total = _int(r.get("totalTokenCount"))
        if total is not None:
            out["total_tokens"] = total
        if cached is not None:
            out["prompt_tokens_details"] = {"cached_tokens": cached}
        if thoughts is not None:
            out["completion_tokens_details"] = {"reasoning_tokens": thoughts}
        return out

    def merged(self, newer: dict[str, Any]) -> "Usage":
        """Anthropic's message_delta usage is cumulative: a non-null field overwrites the
        running value, it is never added (docs/pitfalls.md 15)."""
        d = dict(self.reported)
        for k, v in newer.items():
            if v is not None:
                d[k] = v
        return Usage(self.counting, d)
