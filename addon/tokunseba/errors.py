"""The errors the core raises for input it cannot translate: ``TranslationError`` and one
subclass per cause, so callers branch on the class, never on a string.

Each carries what the client should get: an HTTP status and a message. The adapter turns it
into an error envelope in the client's own protocol (protocols.*.error_body); the client
never sees a traceback or a half-translated body. ``kind`` names the class for records and
for the client's error type (``invalid_request_error`` / ``refused`` / ``api_error``).
"""

from __future__ import annotations


class TranslationError(Exception):
    kind: str | None = None

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def __repr__(self) -> str:  # pragma: no cover
        return f"{type(self).__name__}({self.status}, {self.message!r})"


class InvalidRequest(TranslationError):
    """The client's request is malformed (a 400 naming the JSON path)."""

    kind = "invalid_request_error"


class Refused(TranslationError):
    """The target cannot carry this turn without inventing or breaking it: the route is
    refused before anything is sent (skipped, or an error with ``on_refused: error``)."""

    kind = "refused"


class UntranslatableReply(TranslationError):
    """The upstream's reply cannot be carried to the client (a 502)."""

    kind = "api_error"
