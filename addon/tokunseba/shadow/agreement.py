"""Agreement as facts, by the kind of turn: whether a candidate answered a turn as the
reference did, read from the two replies' facts (shadow/reply_facts.py) and the request's own
words. No model judges another.

``verdict(schema, tools_offered, reference, candidate)`` -> ``{"kind", "agree", "failed",
"facts"}``; ``agree`` is True or False where the facts decide, None where they cannot (then the
comparison is recorded, never counted towards earning a route: routing/earn.py):

- ``structured``: the request asks for structured output (``schema``: Claude Code's title turn,
  ``output_config.format`` json_schema): both replies' text is JSON valid against the request's
  own schema (checked by ``jsonschema``, the schema's own draft), with the same keys;
- ``tool``: the request offers tools and the reference called some: the same tool names in
  order, each call's arguments JSON-equal (for edit tools, ``EDIT_TOOLS``: the same paths, as two
  edits of one file may be written differently and both be right), and the same stop reason;
- ``text``: the rest (a plain text answer, tools offered but none called by the reference): not
  counted. Two texts agree only when a judge says so, and a judge's verdict is an opinion, not a
  fact (LiteLLM's judge flipped on a third of pairs when their order was swapped).

A reference that failed (an error, no reply) is not counted either; a candidate that failed
disagrees. Pure; ``jsonschema`` is imported with the first structured turn compared.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .. import jsonc
from .reply_facts import Facts
from .turns import json_equal

# edit tools: name -> how their paths are read from their arguments (agreement is on paths only)
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)


def _key(*names: str) -> Callable[[Any], list[str]]:
    def paths(args: Any) -> list[str]:
        a = args if isinstance(args, dict) else {}
        return [str(a[n]) for n in names if isinstance(a.get(n), str)]
    return paths


def _patch(args: Any) -> list[str]:
    text = args if isinstance(args, str) else (args.get("input") or args.get("patch") or "") if isinstance(args, dict) else ""
    return sorted(_PATCH_FILE.findall(text)) if isinstance(text, str) else []


EDIT_TOOLS: dict[str, Callable[[Any], list[str]]] = {
    "Edit": _key("file_path"),  # Claude Code: old_string/new_string may be cut differently
    "MultiEdit": _key("file_path"),  # Claude Code: the edits' split is the writer's choice
    "Write": _key("file_path"),  # Claude Code: a whole file's text is never written twice alike
    "NotebookEdit": _key("notebook_path"),  # Claude Code
    "str_replace_based_edit_tool": _key("path"),  # Anthropic's text editor tool
    "replace": _key("file_path"),  # Gemini CLI
    "write_file": _key("file_path"),  # Gemini CLI
    "apply_patch": _patch,  # Codex: the files a patch names (its hunks are the writer's choice)
}


def schema_problem(schema: dict, text: str) -> tuple[Any, str | None]:
    """(the reply's JSON, None) when ``text`` is JSON valid against ``schema``; else (what
    parsed or None, why not)."""
    import jsonschema  # type: ignore[import-untyped]

    try:
        value = jsonc.loads(text.strip())
    except (jsonc.JSONDecodeError, UnicodeDecodeError, ValueError):
        return None, "not JSON"
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
    except jsonschema.SchemaError as e:
        return value, f"the request's schema is not a valid schema ({e.message})"
    error = jsonschema.exceptions.best_match(cls(schema).iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        return value, f"not valid against the request's schema{' at ' + where if where else ''}: {error.message[:200]}"
    return value, None


def _structured(schema: dict, ref: Facts, cand: Facts) -> dict:
    r_value, r_bad = schema_problem(schema, ref.text)
    c_value, c_bad = schema_problem(schema, cand.text)
    failed = []
    if r_bad:
        failed.append(f"reference reply {r_bad}")
    if c_bad:
        failed.append(f"candidate reply {c_bad}")
    same_keys = isinstance(r_value, dict) and isinstance(c_value, dict) and r_value.keys() == c_value.keys()
    if not r_bad and not c_bad and not same_keys:
        failed.append("not the same keys")
    return {"kind": "structured", "agree": not failed, "failed": failed,
            "facts": {"reference_valid": r_bad is None, "candidate_valid": c_bad is None, "same_keys": same_keys}}


def _paths_or_args(name: str, a: Any, b: Any) -> tuple[bool, str]:
    paths = EDIT_TOOLS.get(name)
    if paths is not None:
        pa, pb = paths(a), paths(b)
        return pa == pb, f"{name}: paths {pa} vs {pb}"
    return json_equal(a, b), f"{name}: arguments differ"


def _tool(ref: Facts, cand: Facts) -> dict:
    r_names = [c["name"] for c in ref.tool_calls]
    c_names = [c["name"] for c in cand.tool_calls]
    failed = []
    if r_names != c_names:
        failed.append(f"tool names {r_names} vs {c_names}")
    else:
        for a, b in zip(ref.tool_calls, cand.tool_calls):
            ok, why = _paths_or_args(a["name"], a["arguments"], b["arguments"])
            if not ok:
                failed.append(why)
    if ref.stop_reason != cand.stop_reason:
        failed.append(f"stop reason {ref.stop_reason} vs {cand.stop_reason}")
    return {"kind": "tool", "agree": not failed, "failed": failed,
            "facts": {"same_tool_names": r_names == c_names, "same_stop_reason": ref.stop_reason == cand.stop_reason}}


def verdict(schema: dict | None, tools_offered: bool, reference: Facts, candidate: Facts) -> dict:
    """Whether ``candidate`` answered the turn as ``reference`` did (see the module's docstring)."""
    kind = "structured" if schema is not None else "tool" if tools_offered and reference.tool_calls else "text"
    if reference.error is not None:
        return {"kind": kind, "agree": None, "failed": [f"reference failed: {reference.error[:200]}"], "facts": {}}
    if candidate.error is not None:
        return {"kind": kind, "agree": False, "failed": [f"candidate failed: {candidate.error[:200]}"], "facts": {}}
    if kind == "structured":
        assert schema is not None
        return _structured(schema, reference, candidate)
    if kind == "tool":
        return _tool(reference, candidate)
    if tools_offered and candidate.tool_calls:  # the reference answered in text, the candidate called a tool
        return {"kind": "tool", "agree": False, "failed": ["the reference called no tool; the candidate did"],
                "facts": {"same_tool_names": False}}
    return {"kind": "text", "agree": None, "failed": [], "facts": {"same_text": reference.text == candidate.text}}
