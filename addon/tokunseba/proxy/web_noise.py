"""Leaves out of the log the one line mitmweb's own page makes on every load.

mitmproxy 12's packaged ``tools/web/index.html`` still links ``src/css/vendor.less``, a
development-time stylesheet its package does not ship (its styles are in the built
``static/index-*.css``), so every page load asks for it and tornado logs
``404 GET /src/css/vendor.less (127.0.0.1) 0.52ms``. Nothing is missing from the page; the
line says nothing about the user's flows. This filter drops exactly that line from
``tornado.access``; every other request line (another 404 included) still shows.

No mitmproxy import: a logging filter, installed once by the adapter (proxy/mitm.py).
"""

from __future__ import annotations

import logging

STRAY = "/src/css/vendor.less"  # linked by mitmproxy 12's index.html, shipped by no release


class StrayStylesheet(logging.Filter):
    """False (drop) for tornado's 404 line for ``STRAY``; True for everything else."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # a record that cannot format is not ours to judge
            return True
        return not (msg.startswith("404 GET ") and msg[8:].split(" ", 1)[0].split("?", 1)[0] == STRAY)


_FILTER = StrayStylesheet()


def quiet_stray_stylesheet() -> None:
    """Install the filter on tornado's access logger (idempotent)."""
    access = logging.getLogger("tornado.access")
    if _FILTER not in access.filters:
        access.addFilter(_FILTER)
