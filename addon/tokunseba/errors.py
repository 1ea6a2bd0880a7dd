"""The one error type the core raises for input it cannot translate.

It carries what the client should get: an HTTP status and a message. The adapter turns it
into an error envelope in the client's own protocol (protocols.*.error_body); the client
never sees a traceback or a half-translated body.
"""

from __future__ import annotations


class TranslationError(Exception):
    def __init__(self, status: int, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        # optional hint of the error class ("invalid_request_error", "refused", ...)
        self.kind = kind

    def __repr__(self) -> str:  # pragma: no cover
        return f"TranslationError({self.status}, {self.message!r})"
