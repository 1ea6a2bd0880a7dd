"""The ledger as a whole (ledger/store.py): every turn reported written survives the writer
killed with SIGKILL. Its parts are tested beside their modules: test_location (paths),
test_schema (migrations), test_connection, test_writes, test_reads, test_stats."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tokunseba.ledger import Ledger

ADDON = Path(__file__).resolve().parents[2] / "addon"


# ---------------------------------------------------------------- durability

WRITER = """
import sys, time
from tokunseba.ledger import Ledger
led = Ledger(sys.argv[1])
i = 0
while True:
    rid = f"tk-kill-{i}"
    led.start_turn(rid, started_at=time.time(), client_protocol="anthropic", host="h", path="/v1/messages",
                   requested_model="m", stream=False)
    led.update_turn(rid, status=200, outcome="pass_through", usage_reported={"output_tokens": i},
                    usage_protocol="anthropic")
    led.event(rid, "completed", {"status": 200})
    print(rid, flush=True)
    i += 1
"""


def test_every_turn_reported_written_survives_sigkill(tmp_path):
    path = tmp_path / "l.db"
    env = dict(os.environ, PYTHONPATH=str(ADDON))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, env=env, text=True)
    written: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        while len(written) < 300 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            written.append(line.strip())
        os.kill(proc.pid, signal.SIGKILL)  # mid-loop: no close, no checkpoint
        proc.wait(timeout=10)
        written += [ln.strip() for ln in proc.stdout.read().splitlines() if ln.strip()]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert len(written) >= 300
    with Ledger(path, readonly=True) as led:
        stored = {t["request_id"]: t for t in led.turns()}
        for rid in written:
            t = stored[rid]
            assert (t["status"], t["outcome"], t["usage_output"]) == (200, "pass_through", int(rid.rsplit("-", 1)[1]))
            assert [e["kind"] for e in led.events(rid)] == ["completed"]
