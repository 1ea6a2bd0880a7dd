"""Each agreement fact of a shadow comparison (shadow/agreement.py): structured turns by the
real Claude Code title turn's schema, tool turns by their calls, text turns never counted."""

from __future__ import annotations

import pytest

from tokunseba.shadow.agreement import verdict
from tokunseba.shadow.reply_facts import Facts

from tests.support.title_turn import title_facts


# ---------------------------------------------------------------- agreement facts


def _schema():
    return title_facts().output_schema


def test_structured_turn_both_valid_same_keys_agree():
    v = verdict(_schema(), False, Facts(text='{"title": "Fix the login bug"}'), Facts(text=' {"title": "Login fix"}\n'))
    assert v == {"kind": "structured", "agree": True, "failed": [],
                 "facts": {"reference_valid": True, "candidate_valid": True, "same_keys": True}}


@pytest.mark.parametrize("text, why", [
    ("Fix the login bug", "not JSON"),
    ('```json\n{"title": "x"}\n```', "not JSON"),
    ('{"title": 3}', "not valid against the request's schema at title"),
    ('{"title": "x", "extra": 1}', "not valid against the request's schema"),  # additionalProperties: false
    ("{}", "not valid against the request's schema"),  # required: title
])
def test_structured_turn_candidate_invalid_disagrees(text, why):
    v = verdict(_schema(), False, Facts(text='{"title": "Fix it"}'), Facts(text=text))
    assert v["agree"] is False and v["facts"]["candidate_valid"] is False
    assert any(why in f for f in v["failed"]), v


def test_structured_turn_reference_invalid_is_not_agreement():
    v = verdict(_schema(), False, Facts(text="oops"), Facts(text='{"title": "x"}'))
    assert v["agree"] is False and v["facts"] == {"reference_valid": False, "candidate_valid": True, "same_keys": False}


def test_structured_turn_same_keys_is_a_fact_of_its_own():
    schema = {"type": "object", "properties": {"a": {}, "b": {}}}
    v = verdict(schema, False, Facts(text='{"a": 1}'), Facts(text='{"a": 1, "b": 2}'))
    assert v["agree"] is False and v["failed"] == ["not the same keys"]


def call(name, args, id_="c1"):
    return {"id": id_, "name": name, "arguments": args}


def test_tool_turn_same_calls_agree_and_arguments_are_json_equal():
    ref = Facts(stop_reason="tool_use", tool_calls=[call("Bash", {"command": "ls", "timeout": 1})])
    cand = Facts(stop_reason="tool_use", tool_calls=[call("Bash", {"timeout": 1.0, "command": "ls"}, "other")])
    assert verdict(None, True, ref, cand)["agree"] is True


@pytest.mark.parametrize("cand, failed", [
    (Facts(stop_reason="tool_use", tool_calls=[call("Bash", {"command": "ls -la"})]), "Bash: arguments differ"),
    (Facts(stop_reason="tool_use", tool_calls=[call("Read", {"command": "ls"})]), "tool names ['Bash'] vs ['Read']"),
    (Facts(stop_reason="tool_use", tool_calls=[]), "tool names ['Bash'] vs []"),
    (Facts(stop_reason="max_tokens", tool_calls=[call("Bash", {"command": "ls"})]), "stop reason tool_use vs max_tokens"),
])
def test_tool_turn_disagreements(cand, failed):
    ref = Facts(stop_reason="tool_use", tool_calls=[call("Bash", {"command": "ls"})])
    v = verdict(None, True, ref, cand)
    assert v["kind"] == "tool" and v["agree"] is False and failed in v["failed"]


def test_edit_tools_agree_on_paths():
    ref = Facts(stop_reason="tool_use", tool_calls=[call("Edit", {"file_path": "/a.py", "old_string": "x", "new_string": "y"})])
    same = Facts(stop_reason="tool_use", tool_calls=[call("Edit", {"file_path": "/a.py", "old_string": "x = 1", "new_string": "y = 1"})])
    other = Facts(stop_reason="tool_use", tool_calls=[call("Edit", {"file_path": "/b.py", "old_string": "x", "new_string": "y"})])
    assert verdict(None, True, ref, same)["agree"] is True
    assert verdict(None, True, ref, other)["agree"] is False
    patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** End Patch"
    p1 = Facts(stop_reason="tool_use", tool_calls=[call("apply_patch", patch)])
    p2 = Facts(stop_reason="tool_use", tool_calls=[call("apply_patch", patch.replace("+y", "+z"))])
    assert verdict(None, True, p1, p2)["agree"] is True


def test_plain_text_turns_are_never_counted():
    v = verdict(None, False, Facts(text="hello", stop_reason="end_turn"), Facts(text="hello", stop_reason="end_turn"))
    assert v["kind"] == "text" and v["agree"] is None  # even the same text: not counted
    v = verdict(None, True, Facts(text="done", stop_reason="end_turn"), Facts(text="ok", stop_reason="end_turn"))
    assert v["kind"] == "text" and v["agree"] is None
    v = verdict(None, True, Facts(text="done"), Facts(tool_calls=[call("Bash", {})], stop_reason="tool_use"))
    assert v["agree"] is False


def test_failures():
    assert verdict(_schema(), False, Facts(error="HTTP 500"), Facts(text='{"title": "x"}'))["agree"] is None
    assert verdict(_schema(), False, Facts(text='{"title": "x"}'), Facts(error="timeout"))["agree"] is False
