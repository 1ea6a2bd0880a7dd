"""What the proxy's parts share, below them all (proxy/mitm.py chains the parts).

- ``Capacity``: turn/failover.py's cooldowns and slots, with the one thing that needs the
  event loop: waiting up to an endpoint's ``queue_s`` for a slot (``wait``).
"""

from __future__ import annotations

import asyncio

from ..routing.endpoints import Endpoint
from ..turn import failover
from ..turn.failover import Slot


class Capacity(failover.Capacity):
    async def wait(self, ep: Endpoint, timeout: float) -> Slot | None:
        """A slot within ``timeout`` seconds (first come, first served), else None."""
        slot = self.acquire(ep)
        if slot is not None or timeout <= 0:
            return slot
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue(ep, fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except (TimeoutError, asyncio.CancelledError):
            self.give_up(ep, fut)  # a slot handed over in the same instant goes back
            fut.cancel()
            return None
        return Slot(self, ep.name)
