"""mitmweb's stray stylesheet 404 is left out of the log; every other request line stays
(proxy/web.py), through a real logger as tornado writes to it."""

from __future__ import annotations

import logging

from tokunseba.proxy.web import StrayStylesheet, quiet_stray_stylesheet


def test_only_the_stray_stylesheet_404_is_dropped(caplog):
    quiet_stray_stylesheet()
    quiet_stray_stylesheet()  # idempotent
    access = logging.getLogger("tornado.access")
    assert sum(isinstance(f, StrayStylesheet) for f in access.filters) == 1
    with caplog.at_level(logging.INFO, logger="tornado.access"):
        access.warning("%d %s %.2fms", 404, "GET /src/css/vendor.less (127.0.0.1)", 0.52)
        access.warning("%d %s %.2fms", 404, "GET /src/css/vendor.less?v=1 (127.0.0.1)", 0.4)
        access.warning("%d %s %.2fms", 404, "GET /src/css/other.less (127.0.0.1)", 0.5)
        access.warning("%d %s %.2fms", 403, "GET /src/css/vendor.less (127.0.0.1)", 0.5)
        access.info("%d %s %.2fms", 200, "GET / (127.0.0.1)", 1.0)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["404 GET /src/css/other.less (127.0.0.1) 0.50ms", "403 GET /src/css/vendor.less (127.0.0.1) 0.50ms",
                    "200 GET / (127.0.0.1) 1.00ms"]
