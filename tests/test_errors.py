"""The errors the core raises for input it cannot translate (errors.py): one class per cause, each
carrying the status and message the client gets and the ``kind`` its records and error type use."""

from __future__ import annotations

import pytest

from tokunseba.errors import InvalidRequest, Refused, TranslationError, UntranslatableReply


@pytest.mark.parametrize(("cls", "kind"), [(InvalidRequest, "invalid_request_error"), (Refused, "refused"),
                                           (UntranslatableReply, "api_error")])
def test_each_cause_is_a_translation_error_with_its_kind(cls, kind):
    e = cls(400, "messages[0].content: required")
    assert isinstance(e, TranslationError) and isinstance(e, Exception)
    assert (e.kind, e.status, e.message) == (kind, 400, "messages[0].content: required")
    assert str(e) == "messages[0].content: required"  # the message alone: no status, no class name


def test_callers_branch_on_the_class():
    with pytest.raises(Refused):
        raise Refused(400, "no translator")
    try:
        raise UntranslatableReply(502, "reply not JSON")
    except InvalidRequest:  # pragma: no cover - a sibling class never catches it
        pytest.fail("UntranslatableReply caught as InvalidRequest")
    except TranslationError as e:
        assert e.status == 502


def test_the_base_class_names_no_kind():
    assert TranslationError(500, "x").kind is None
