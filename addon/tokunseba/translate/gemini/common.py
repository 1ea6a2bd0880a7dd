"""What both halves of the Gemini request codec read (decode.py, encode.py): how text parts join
and the checks that name a bad value by its JSON path."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidRequest, Refused, TranslationError

JOIN = "\n\n"  # how several text parts (system, user) become one string


def bad(path: str, msg: str, *, refused: bool = False) -> TranslationError:
    return (Refused if refused else InvalidRequest)(400, f"{path}: {msg}")


def obj(v: Any, path: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise bad(path, "must be an object")
    return v


def arr(v: Any, path: str) -> list[Any]:
    if not isinstance(v, list):
        raise bad(path, "must be an array")
    return v


def opt_str(v: Any, path: str) -> str | None:
    """A field that is a string when present (a Chat client's body is read as it came)."""
    if v is not None and not isinstance(v, str):
        raise bad(path, "must be a string")
    return v
