"""The web part: what mitmweb and the terminal show of the turns, never what goes on the wire.

- ``replayable`` (first in the ``request`` hook): mitmweb's Replay of a flow tokunseba
  rewrote puts the client's own request back, so the turn goes through the rules again;
- at ``running``, mitmweb's flow list gets its comment column style (webview/style.py);
- ``DisplayRedaction``: an addon of its own, after the turn's hooks and before mitmproxy's
  flow log: credential headers and secret query values redacted in the flow as shown;
- ``OriginalRequestView``: mitmweb's view of the client's request before tokunseba rewrote it;
- ``tokunseba_console`` (its option): ``turns`` leaves mitmproxy's per-connection lines out;
- ``UnheardLogEvents``: mitmproxy's deprecated ``add_log`` event carries tokunseba's own log
  records only while a loaded addon listens to it (put on at ``running``, taken off at ``done``).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from mitmproxy import contentviews, ctx, exceptions, http
from mitmproxy.log import LegacyLogEvents

from ..credentials import KNOWN_SECRETS, REDACTED, is_credential_header, redact_query
from ..protocols import guess_protocol, is_provider_host, looks_like_provider_call
from ..turn import LocalResponse
from ..turn import field_name
from ..webview import styled_first_chunk
from ..webview import MARKS, ORIGINAL_KEY, RECORD_KEY, original_view_text
from .core import Core, Part, log, respond

KEYS = {"tokunseba_console"}


class Web(Part):
    KEYS = KEYS  # the options this part owns

    def configure(self, updated: set[str]) -> None:
        if "tokunseba_console" in updated:
            if ctx.options.tokunseba_console not in ("all", "turns"):
                raise exceptions.OptionsError(f"tokunseba_console: {ctx.options.tokunseba_console!r} is not all or turns")
            _CONNECTION_CHATTER.quiet = ctx.options.tokunseba_console == "turns"

    def start(self) -> None:
        """At ``running``, in mitmweb: the comment column's style on its pages."""
        web = getattr(ctx.master, "app", None)  # mitmweb's tornado application (mitmdump has none)
        transforms = getattr(web, "transforms", None)
        if isinstance(transforms, list):  # mitmweb: tornado is loaded (mitmdump never imports it)
            style = comment_column_style()
            if style not in transforms:
                transforms.insert(0, style)  # before gzip: it styles the page as written

    def replayable(self, flow: http.HTTPFlow) -> bool:
        """A replayed flow: False when it was answered here (it cannot be replayed)."""
        try:
            return self._prepare_replay(flow)
        except Exception as e:  # as the request hook's own failures: a provider call gets an error
            log.exception("tokunseba: request hook failed")
            if looks_like_provider_call(flow.request, self.core.provider_hosts):
                respond(flow, LocalResponse.error(guess_protocol(flow.request.path), 500,
                                                  f"tokunseba internal error: {e}", "api_error"))
            return False

    def _prepare_replay(self, flow: http.HTTPFlow) -> bool:
        """mitmweb's Replay of a flow tokunseba rewrote: put the client's own request back so the
        turn goes through the rules and translators again. Refused with a clear error in the
        client's protocol when that request is no longer known (a flow loaded from a file:
        saved flows do not keep the client's key). False when the flow was answered."""
        rec = flow.metadata.get(RECORD_KEY)
        original = flow.metadata.get(ORIGINAL_KEY)
        for k in (RECORD_KEY, ORIGINAL_KEY, "tokunseba.request_id"):
            flow.metadata.pop(k, None)
        if not isinstance(rec, dict) or not rec.get("rewritten"):
            return True
        kept = self.core.replayable.get(flow.id)
        if kept is None or (rec.get("body_changed") and (original is None or not rec.get("body_exact"))):
            why = ("the client's request is not kept in memory (a flow loaded from a file, or an older one): "
                   "send the turn again from the client") if kept is None else "the client's body was too large to keep"
            msg = f"tokunseba: this flow cannot be replayed: tokunseba rewrote it and {why}"
            respond(flow, LocalResponse.error(rec.get("client_protocol") or guess_protocol(flow.request.path), 400,
                                              msg, "invalid_request_error"))
            flow.marked, flow.comment = MARKS["refused"], msg
            return False
        url, headers = kept
        flow.request.headers = headers.copy()
        flow.request.url = url
        if rec.get("body_changed"):
            assert original is not None  # else refused above
            flow.request.content = original.encode("utf-8")
        return True


@functools.cache
def comment_column_style() -> type:
    """The tornado output transform that widens mitmweb's comment column (webview/style.py),
    made the first time mitmweb asks: mitmdump never imports tornado."""
    import tornado.web

    class CommentColumnStyle(tornado.web.OutputTransform):
        def transform_first_chunk(self, status_code, headers, chunk, finishing):
            return styled_first_chunk(status_code, headers, chunk)
    return CommentColumnStyle


class _ConnectionChatter(logging.Filter):
    """Leaves mitmproxy's per-connection lines (client/server connect and disconnect, a server
    connection that failed) out of the log when ``quiet`` (tokunseba_console=turns); its
    warnings and errors still show."""

    quiet = False

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.quiet and record.levelno <= logging.INFO)


_CONNECTION_CHATTER = _ConnectionChatter()
logging.getLogger("mitmproxy.proxy.server").addFilter(_CONNECTION_CHATTER)


OWN_LOGGER = "tokunseba"  # the loggers whose records this filter may hold back (and their children)


class UnheardLogEvents(logging.Filter):
    """mitmproxy's deprecated ``add_log`` event for tokunseba's own log records, sent only when an
    addon listens to it.

    mitmproxy hands every log record to its ``LegacyLogEvents`` handler (mitmproxy/log.py), which
    formats the record again, wakes the event loop from the record's thread
    (``call_soon_threadsafe``: a system call) and then triggers ``AddLogHook`` across every loaded
    addon: about 0.1 ms of the event loop per record in mitmdump (~30 addons), more than the rest
    of writing a turn's console line. Nothing in mitmproxy listens to that event any more: the
    terminal (termlog) and mitmweb's event log (eventstore) are logging handlers of their own, and
    they get every record as before. This is a filter on that one handler: a
    record of tokunseba's loggers goes on to it only while some loaded addon defines ``add_log``
    (looked up again whenever the set of loaded addons changes), so an addon that still listens
    gets every line as before; other loggers' records are not touched.
    """

    def __init__(self, addons: Any) -> None:
        super().__init__()
        self.addons = addons  # mitmproxy's AddonManager: its ``lookup`` holds every loaded addon
        self._loaded: tuple[Any, ...] | None = None  # the addons last looked at (None: not yet)
        self._heard = True

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        if name != OWN_LOGGER and not name.startswith(OWN_LOGGER + "."):
            return True
        try:
            return self.heard()
        except Exception:  # addons changing in another thread: send it, as without this filter
            return True

    def heard(self) -> bool:
        """Whether a loaded addon defines ``add_log``; looked up when the loaded addons change."""
        loaded = tuple(self.addons.lookup.values())
        seen = self._loaded
        if seen is None or len(loaded) != len(seen) or any(a is not b for a, b in zip(loaded, seen)):
            self._heard = any(hasattr(a, "add_log") for a in loaded)
            self._loaded = loaded
        return self._heard


def quiet_unheard_log_events(master: Any) -> UnheardLogEvents | None:
    """At ``running``: the filter put on mitmproxy's ``LegacyLogEvents`` handler of the root
    logger (once); None when there is no such handler (an embedding without a master's)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, LegacyLogEvents) and getattr(handler, "master", None) is master:
            for f in handler.filters:
                if isinstance(f, UnheardLogEvents):
                    return f
            quiet = UnheardLogEvents(handler.master.addons)
            handler.addFilter(quiet)
            return quiet
    return None


def unquiet(master: Any) -> None:
    """At ``done``: the filter taken off again (an embedding that goes on logs as before)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, LegacyLogEvents) and getattr(handler, "master", None) is master:
            for f in [f for f in handler.filters if isinstance(f, UnheardLogEvents)]:
                handler.removeFilter(f)


class DisplayRedaction:
    """Runs after Tokunseba's hooks and before mitmproxy's own flow log (its Dumper prints a
    flow in its ``response`` / ``error`` hooks, after the request was sent): credential
    headers and secret query values of provider calls are redacted in the flow as shown
    (terminal at any flow_detail, mitmweb, saved flows), never on the wire."""

    def __init__(self, main) -> None:
        self.main = main  # the Tokunseba addon (proxy/mitm.py): its provider_hosts

    def response(self, flow: http.HTTPFlow) -> None:
        self._redact(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self._redact(flow)

    def _redact(self, flow: http.HTTPFlow) -> None:
        try:
            req = flow.request
            if "tokunseba.request_id" not in flow.metadata and not is_provider_host(req, self.main.provider_hosts):
                return
            fields = req.headers.fields
            if any(is_credential_header(field_name(k)) for k, _ in fields):  # one pass over the raw fields
                req.headers.fields = tuple((k, REDACTED_BYTES) if is_credential_header(field_name(k)) else (k, v)
                                           for k, v in fields)
            if "?" in req.path:
                req.path = redact_query(req.path)
            elif KNOWN_SECRETS:
                req.path = KNOWN_SECRETS.redact_text(req.path)
        except Exception:
            log.exception("tokunseba: redacting the flow for display failed")


REDACTED_BYTES = REDACTED.encode()


class OriginalRequestView(contentviews.Contentview):
    """mitmweb: the client's original request (URL, redacted headers, indented JSON body)
    before tokunseba rewrote it; a plain sentence for flows it did not rewrite."""

    name = "tokunseba-original"
    syntax_highlight = "yaml"

    def prettify(self, data: bytes, metadata: contentviews.Metadata) -> str:
        f = metadata.flow
        md = getattr(f, "metadata", None) or {}
        rec = md.get(RECORD_KEY)
        body = md.get(ORIGINAL_KEY)
        if body is None and isinstance(rec, dict) and not rec.get("body_changed"):
            body = data.decode("utf-8", "replace")  # only the URL/headers changed: the body is the client's
        return original_view_text(rec if isinstance(rec, dict) else None, body,
                                  is_request=not isinstance(metadata.http_message, http.Response),
                                  truncated=isinstance(rec, dict) and not rec.get("body_exact", True))

    def render_priority(self, data: bytes, metadata: contentviews.Metadata) -> float:
        return -1


contentviews.add(OriginalRequestView)


# ---- mitmweb's own log noise: mitmproxy 12's packaged tools/web/index.html still links
# src/css/vendor.less, a development-time stylesheet its package does not ship, so every page
# load logs `404 GET /src/css/vendor.less`; nothing is missing from the page. Exactly that line
# is left out of tornado.access; every other request line (another 404 included) still shows.
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


quiet_stray_stylesheet()
