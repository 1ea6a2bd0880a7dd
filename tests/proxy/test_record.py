"""The console line (turn/console_line.py) is built only when the ``tokunseba`` logger
emits INFO (as under mitmdump, whose root logger is at DEBUG); where nothing would emit it,
the turn costs no line. Either way the ledger records the turn the same. Like the record, the line
is written once mitmproxy has handed the reply's last bytes to the client (it never holds them back)."""

from __future__ import annotations

import asyncio
import json
import logging

from mitmproxy import http
from mitmproxy.test import tutils

import tokunseba.turn.ending as ending  # the console line is built by the turn's Ending, written where a turn is recorded

from tests.proxy.test_mitm import ANT_BODY, CHAT_REPLY, _ledger_turn, addon, endpoint_port, make_flow, rules_file  # noqa: F401


async def one_turn(addon) -> str:
    f = make_flow(ANT_BODY)
    await addon.request(f)
    f.response = tutils.tresp(headers=http.Headers(content_type="application/json"), content=None)
    addon.responseheaders(f)
    f.response.content = json.dumps(CHAT_REPLY).encode()
    addon.response(f)
    f.live = False  # mitmproxy has written the reply: the line, like the record, follows (record.complete)
    for _ in range(3):
        await asyncio.sleep(0)
    return f.metadata["tokunseba.request_id"]


async def test_the_line_is_written_when_info_is_emitted(addon, caplog, tmp_path):
    caplog.set_level(logging.INFO, logger="tokunseba")
    rid = await one_turn(addon)
    lines = [r.getMessage() for r in caplog.records if r.name == "tokunseba" and r.getMessage().startswith(rid)]
    assert lines == [f"{rid} anthropic client claude-haiku-4-5 → easy-turns → oai · translated 200 · "
                     f"prompt_tokens=9 completion_tokens=1 total_tokens=10 · $0 local · {lines[0].rsplit(' · ', 1)[1]}"]  # oai is on loopback
    row, kinds = await _ledger_turn(addon, tmp_path, rid)
    assert row["outcome"] == "translated" and kinds[-1] == "completed"


async def test_the_line_is_not_built_when_info_would_not_be_emitted(addon, caplog, tmp_path, monkeypatch):
    caplog.set_level(logging.WARNING, logger="tokunseba")
    built = []
    monkeypatch.setattr(ending, "turn_line", lambda **kw: built.append(kw) or "")
    rid = await one_turn(addon)
    assert built == [] and not [r for r in caplog.records if r.getMessage().startswith(rid)]
    row, kinds = await _ledger_turn(addon, tmp_path, rid)  # recorded all the same
    assert row["outcome"] == "translated" and kinds[-1] == "completed"
    caplog.set_level(logging.INFO, logger="tokunseba")
    await one_turn(addon)
    assert len(built) == 1
