"""`tokunseba log` and `tokunseba stats` tell the same story: a translated turn the endpoint
answered with a 400 is an error in both, with the upstream's message in log's ERROR column
(real mitmdump, scripted upstream, the Anthropic SDK, the installed CLI)."""

from __future__ import annotations

import json
import subprocess

import anthropic
import pytest

from .conftest import BIN, ledger_settled, point_clients_at, start_test_proxy
from tests.support.upstream import Reply

pytestmark = pytest.mark.e2e

MESSAGE = "messages.0.content: this endpoint wants a string here"


def test_translated_turn_with_an_upstream_400_is_an_error_in_log_and_stats(upstreams, tmp_path, monkeypatch):
    proxy = start_test_proxy(upstreams, tmp_path)
    try:
        point_clients_at(proxy, monkeypatch)
        upstreams["oai"].script(Reply.json({"error": {"message": MESSAGE, "type": "invalid_request_error",
                                                      "param": "messages", "code": None}}, 400))
        with pytest.raises(anthropic.BadRequestError) as ei:
            anthropic.Anthropic(api_key="sk-ant-log", max_retries=0).messages.create(
                model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        rid = ei.value.response.headers["x-tokunseba-request-id"]
        ledger_settled(proxy.ledger)
    finally:
        proxy.stop()
    cli = [str(BIN / "tokunseba")]
    text = subprocess.run([*cli, "log", "--ledger", str(proxy.ledger)], capture_output=True, text=True, timeout=60)
    (row,) = [ln for ln in text.stdout.splitlines() if rid[:11] in ln]
    assert " a2o → oai " in row and " error " in row and " 400 " in row and " translated " not in row, row
    assert row.rstrip().endswith(MESSAGE), row
    (turn,) = [t for t in json.loads(subprocess.run([*cli, "log", "--ledger", str(proxy.ledger), "--json"],
                                                    capture_output=True, text=True, timeout=60).stdout)
               if t["request_id"] == rid]
    assert turn["outcome"] == "translated" and turn["status"] == 400 and turn["error"] == MESSAGE
    stats = json.loads(subprocess.run([*cli, "stats", "--ledger", str(proxy.ledger), "--json"],
                                      capture_output=True, text=True, timeout=60).stdout)
    # one class per turn: an error, not also translated (the classes add up to the turns)
    assert stats["errors"] == 1 and stats["translated"] == 0 and stats["turns"] == 1, stats
