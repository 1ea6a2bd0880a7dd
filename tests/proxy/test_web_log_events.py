"""mitmproxy's deprecated ``add_log`` event carries tokunseba's records only while an addon
listens to it (proxy/web.py), through a real mitmproxy master and its own handlers."""

from __future__ import annotations

import asyncio
import logging

from mitmproxy import master, options
from mitmproxy.log import LegacyLogEvents

from tokunseba.proxy.web import UnheardLogEvents, quiet_unheard_log_events, unquiet


class Listener:
    def __init__(self) -> None:
        self.said: list[str] = []

    def add_log(self, entry) -> None:
        self.said.append(entry.msg)


class Triggers:
    """Counts the events mitmproxy triggers across the addons (any hook)."""

    def __init__(self, m: master.Master) -> None:
        self.seen: list[str] = []
        real = m.addons.trigger

        def trigger(event):
            self.seen.append(event.name)
            return real(event)

        m.addons.trigger = trigger


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_own_records_skip_the_event_nobody_hears_and_reach_one_that_listens():
    m = master.Master(options.Options())
    try:
        quiet = quiet_unheard_log_events(m)
        assert isinstance(quiet, UnheardLogEvents)
        assert quiet_unheard_log_events(m) is quiet  # once
        triggers = Triggers(m)
        logging.getLogger().setLevel(logging.DEBUG)
        logging.getLogger("tokunseba").info("a turn's line")
        logging.getLogger("tokunseba.ledger").warning("a ledger warning")
        await _settle()
        assert "add_log" not in triggers.seen  # nobody listens: no event, no wake-up
        logging.getLogger("someone.else").info("another addon's line")
        await _settle()
        assert triggers.seen.count("add_log") == 1  # other loggers' records as before

        listener = Listener()
        m.addons.add(listener)  # a listener loaded later is seen at the next record
        logging.getLogger("tokunseba").info("heard now")
        await _settle()
        assert listener.said[-1].endswith("] heard now")
        m.addons.remove(listener)
        logging.getLogger("tokunseba").info("unheard again")
        await _settle()
        assert listener.said[-1].endswith("] heard now")
    finally:
        unquiet(m)
        m._legacy_log_events.uninstall()
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, LegacyLogEvents)]
    assert not any(isinstance(f, UnheardLogEvents) for h in handlers for f in h.filters)
