"""The strata keys an earned route is learnt by (routing/strata.py): client, agent, tool set,
thinking and size bucket of a turn."""

from __future__ import annotations

from tokunseba.routing import stratum_of, turn_facts
from tokunseba.routing.strata import size_bucket, tool_set

from tests.support.title_turn import title_facts


# ---------------------------------------------------------------- strata


def test_stratum_of_the_title_turn():
    s = stratum_of("cc", title_facts())
    assert (s.client, s.agent, s.tools, s.thinking, s.size) == ("anthropic", "background", "none", False, "≤4KB")
    assert s.key == "route=cc client=anthropic agent=background tools=none thinking=off size=≤4KB"


def test_tool_set_is_a_stable_hash_of_the_sorted_names():
    assert tool_set(["Bash", "Read", "Edit"]) == tool_set(["Edit", "Bash", "Read", "Read"])
    assert tool_set(["Bash", "Read"]) != tool_set(["Bash", "Edit"])
    assert tool_set([]) == "none"
    assert tool_set(["Bash", "Read"]).startswith("2:") and len(tool_set(["Bash"])) == 2 + 8


def test_stratum_of_a_main_turn_with_tools_and_thinking():
    body = {"model": "m", "max_tokens": 10, "thinking": {"type": "enabled", "budget_tokens": 1024},
            "tools": [{"name": "Bash", "input_schema": {}}, {"name": "Read", "input_schema": {}}],
            "messages": [{"role": "user", "content": "x" * 40000}]}
    f = turn_facts("anthropic", body, 40100, {"x-claude-code-session-id": "s", "user-agent": "claude-cli/2.1 (external, cli)"})
    s = stratum_of("r", f)
    assert s.tools == tool_set(["Bash", "Read"]) and s.thinking and s.size == "≤128KB" and s.agent == "main"
    assert size_bucket(10**9) == ">256KB"
