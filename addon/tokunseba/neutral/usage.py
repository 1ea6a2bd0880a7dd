"""Usage exactly as reported, and its conversion between protocols (protocols.md E.4).

A ``Usage`` holds the upstream's own usage object untouched plus the protocol that
reported it. Conversions copy numbers and re-base only where definitions differ:
OpenAI ``prompt_tokens`` includes cached tokens, Anthropic ``input_tokens`` does not.
A field the upstream did not report stays absent: never zero-filled, never estimated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ANTHROPIC = "anthropic"
OPENAI = "openai"  # Chat Completions semantics (Responses shares them)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class Usage:
    protocol: str  # "anthropic" or "openai"
    reported: dict  # the upstream's usage object, as it came

    # ---- the numbers as the upstream named and counted them (for the ledger) ----
    def fields(self) -> dict[str, int | None]:
        """input / output / cache read / cache write / reasoning, in the upstream's own
        counting (OpenAI input includes cached tokens; Anthropic input does not)."""
        r = self.reported
        if self.protocol == ANTHROPIC:
            otd = r.get("output_tokens_details") if isinstance(r.get("output_tokens_details"), dict) else {}
            return {
                "input": _int(r.get("input_tokens")),
                "output": _int(r.get("output_tokens")),
                "cache_read": _int(r.get("cache_read_input_tokens")),
                "cache_write": _int(r.get("cache_creation_input_tokens")),
                "reasoning": _int(otd.get("thinking_tokens")),
            }
        ptd = r.get("prompt_tokens_details") if isinstance(r.get("prompt_tokens_details"), dict) else {}
        ctd = r.get("completion_tokens_details") if isinstance(r.get("completion_tokens_details"), dict) else {}
        # Responses API names (input_tokens/output_tokens, *_details) share Chat semantics
        itd = r.get("input_tokens_details") if isinstance(r.get("input_tokens_details"), dict) else {}
        otd = r.get("output_tokens_details") if isinstance(r.get("output_tokens_details"), dict) else {}
        inp = _int(r.get("prompt_tokens"))
        if inp is None:
            inp = _int(r.get("input_tokens"))
        out = _int(r.get("completion_tokens"))
        if out is None:
            out = _int(r.get("output_tokens"))
        cr = _int(ptd.get("cached_tokens"))
        if cr is None:
            cr = _int(itd.get("cached_tokens"))
        cw = _int(ptd.get("cache_write_tokens"))
        if cw is None:
            cw = _int(itd.get("cache_write_tokens"))
        rs = _int(ctd.get("reasoning_tokens"))
        if rs is None:
            rs = _int(otd.get("reasoning_tokens"))
        return {"input": inp, "output": out, "cache_read": cr, "cache_write": cw, "reasoning": rs}

    # ---- conversions ----
    def to_anthropic(self) -> dict:
        """The Anthropic usage object a client sees (only reported fields)."""
        if self.protocol == ANTHROPIC:
            return dict(self.reported)
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

    def to_openai(self) -> dict:
        """The Chat Completions usage object a client sees (only reported fields)."""
        if self.protocol == OPENAI:
            return dict(self.reported)
        f = self.fields()
        out: dict[str, Any] = {}
        if f["input"] is not None:
            out["prompt_tokens"] = f["input"] + (f["cache_read"] or 0) + (f["cache_write"] or 0)
        if f["output"] is not None:
            out["completion_tokens"] = f["output"]
        if "prompt_tokens" in out and "completion_tokens" in out:
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

    def merged(self, newer: dict) -> "Usage":
        """Anthropic's message_delta usage is cumulative: a non-null field overwrites the
        running value, it is never added (pitfalls.md 15)."""
        d = dict(self.reported)
        for k, v in newer.items():
            if v is not None:
                d[k] = v
        return Usage(self.protocol, d)
