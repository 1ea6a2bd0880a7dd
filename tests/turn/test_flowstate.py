"""What tokunseba holds for one in-flight flow (turn/flowstate.py): plain data — each flow's state
its own (no default shared between flows), nothing set before the hooks set it, no mitmproxy."""

from __future__ import annotations

import ast
from pathlib import Path

from tokunseba.turn import flowstate
from tokunseba.turn.flowstate import FlowState, Shown


def test_a_new_flows_state_holds_only_its_turn():
    turn = object()
    s = FlowState(turn)  # type: ignore[arg-type]
    assert s.turn is turn
    assert (s.shown, s.relay_token, s.mode, s.pump, s.chain, s.slot) == (None,) * 6
    assert (s.shadowed, s.attempt_at, s.client_close) == (False, 0.0, False)


def test_what_mitmweb_shows_is_kept_per_flow():
    a, b = Shown("https://api.anthropic.com/v1/messages"), Shown(None)
    a.secrets.add("sk-SECRET")
    a.added_keys.append("x-api-key")
    assert b.secrets == set() and b.added_keys == [] and b.client_target is None


def test_plain_data_no_mitmproxy():
    tree = ast.parse(Path(flowstate.__file__).read_text())
    modules = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m.startswith("mitmproxy") for m in modules)
