"""One context-window table (protocols/failures.CONTEXT_WINDOW) and one reader
(``is_context_window``), read by failover and by every error envelope.

Before, two tables said the same thing in different words: neutral/error.py's
``CONTEXT_CODES`` / ``CONTEXT_TYPES`` / ``CONTEXT_TEXT`` (read by the envelopes: Claude Code's
"prompt is too long", Chat's ``context_length_exceeded``, Gemini's 400) and the failover
table. Their rows are frozen below, as they were at 4a26119, with a sample of each: every
wording either table recognised is recognised by the one table, nothing else is (a case
change of a code aside), and what a client sees for each is what it saw.
"""

from __future__ import annotations

import json
import re

import pytest

from tokunseba.neutral.error import UpstreamError, error_from_obj, parse_error_body
from tokunseba.protocols import anthropic as pa
from tokunseba.protocols import gemini as pg
from tokunseba.protocols import openai_chat as po
from tokunseba.protocols.failures import CONTEXT_STATUSES, CONTEXT_WINDOW, is_context_window
from tokunseba.turn.failover import Failure

# ---- the two tables this one replaced, as they were -------------------------------------

OLD_NEUTRAL_CODES = frozenset({"context_length_exceeded"})
OLD_NEUTRAL_TYPES = frozenset({"exceed_context_size_error"})
OLD_NEUTRAL_TEXT = re.compile(
    r"maximum context length|context length exceeded|exceeds? (?:the )?(?:available )?context"
    r"|context window|prompt is too long|input length and `max_tokens` exceed context limit"
    r"|input token count .* exceeds the maximum number of tokens",
    re.IGNORECASE,
)


def old_neutral(err: UpstreamError) -> bool:
    if err.code in OLD_NEUTRAL_CODES or err.type in OLD_NEUTRAL_TYPES:
        return True
    return (err.status < 500) and bool(OLD_NEUTRAL_TEXT.search(err.message))


OLD_FAILOVER_ROWS = [
    ("code", r"^context_length_exceeded$"),
    ("type", r"^exceed_context_size_error$"),
    ("message", r"exceeds? the available context size"),
    ("message", r"maximum context length"),
    ("message", r"context length exceeded|context window"),
    ("message", r"exceeds the context window"),
    ("message", r"prompt is too long"),
    ("message", r"input length and `max_tokens` exceed context limit"),
    ("message", r"input token count .* exceeds the maximum number of tokens"),
]


def old_failover(err: UpstreamError) -> bool:
    """The failover reader (own protocol's rows, then every other's: in effect every row)."""
    return any(isinstance(v := getattr(err, f), str) and re.search(rx, v, re.IGNORECASE) for f, rx in OLD_FAILOVER_ROWS)


# ---- one sample per row and per alternative of the old tables ----------------------------

def _oai(message: str, code: str | None = None, etype: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": etype, "param": None, "code": code}}).encode()


def _ant(message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": message}}).encode()


RECOGNISED = {
    # neutral CONTEXT_CODES / failover "code" row (OpenAI, vLLM, LiteLLM)
    "code": _oai("Too long", "context_length_exceeded"),
    # neutral CONTEXT_TYPES / failover "type" row (llama-server)
    "type": json.dumps({"error": {"code": 400, "message": "x", "type": "exceed_context_size_error",
                                  "n_prompt_tokens": 5000, "n_ctx": 4096}}).encode(),
    # each alternative of neutral CONTEXT_TEXT, and each failover "message" row
    "maximum context length": _oai("This model's maximum context length is 4096 tokens. However, you requested 9000"),
    "context length exceeded": b'{"error": "context length exceeded"}',  # Ollama's flat envelope
    "exceeds the available context size": _oai("the request exceeds the available context size, try increasing it",
                                               etype="server_error"),
    "exceed context (neutral only)": _oai("prompt would exceed context of 8192 tokens"),
    "exceeds available context (neutral only)": b'{"detail": "input exceeds available context"}',  # FastAPI
    "context window": b"context window exceeded",
    "exceeds the context window": _oai("Your input exceeds the context window of this model."),
    "prompt is too long": _ant("prompt is too long: 208310 tokens > 200000 maximum"),
    "max_tokens exceed context limit": _ant("input length and `max_tokens` exceed context limit: "
                                            "198000 + 64000 > 200000, decrease input length or `max_tokens`"),
    "gemini input token count": json.dumps({"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                                            "The input token count (1200000) exceeds the maximum number of "
                                            "tokens allowed (1048576)."}}).encode(),
}

NOT_CONTEXT = {
    "temperature": _oai("Invalid value for 'temperature'"),
    "bad key": _oai("bad key", etype="authentication_error"),
    "field required": b'{"detail": "field required"}',
    "too large": b"request entity too large",
    "html": b"<html><body>Bad Request</body></html>",
    "empty": b"",
    "max_tokens too big": _ant("max_tokens: 300000 > 64000, which is the maximum allowed number of output tokens"),
}


@pytest.mark.parametrize("name", sorted(RECOGNISED))
@pytest.mark.parametrize("status", sorted(CONTEXT_STATUSES))
def test_every_wording_either_old_table_knew_is_recognised_by_the_one_table(name, status):
    err = parse_error_body(status, RECOGNISED[name])
    assert old_neutral(err) or old_failover(err), name  # the sample is one of the old tables' wordings
    assert is_context_window(err), name
    f = Failure.of(status, RECOGNISED[name], "openai")
    assert f is not None and f.kind == "context_window", name


@pytest.mark.parametrize("name", sorted(NOT_CONTEXT))
def test_what_neither_knew_is_not_a_context_window_error(name):
    err = parse_error_body(400, NOT_CONTEXT[name])
    assert not old_neutral(err) and not old_failover(err)
    assert not is_context_window(err) and Failure.of(400, NOT_CONTEXT[name]) is None


@pytest.mark.parametrize("body", sorted(RECOGNISED.values()) + sorted(NOT_CONTEXT.values()))
@pytest.mark.parametrize("status", [400, 413, 422, 429, 500, 503, 529])
def test_the_one_reader_answers_what_the_envelopes_old_reader_answered(body, status):
    """What a client sees hangs on the envelopes' reader: it answers as neutral/error.py's did
    for every sample at every status (a server error mentioning the prompt stays a server
    error; a code or a type counts at any status)."""
    err = parse_error_body(status, body)
    assert is_context_window(err) == old_neutral(err)


def test_a_mid_stream_error_with_the_code_counts_without_a_client_status():
    err = error_from_obj(500, {"error": {"message": "too long", "code": "context_length_exceeded"}},
                         status_from_code=True)
    assert err.status == 500 and is_context_window(err) and old_neutral(err)
    err = error_from_obj(500, {"error": {"message": "prompt is too long"}}, status_from_code=True)
    assert not is_context_window(err) and not old_neutral(err)


def test_each_row_matches_its_own_field_of_a_sample():
    """Every row of the one table is used: some recognised sample matches it in its field."""
    errs = [parse_error_body(400, b) for b in RECOGNISED.values()]
    for proto, rows in CONTEXT_WINDOW.items():
        for field, rx, why in rows:
            assert field in ("code", "type", "message") and why
            assert any(isinstance(v := getattr(e, field), str) and re.search(rx, v, re.IGNORECASE) for e in errs), \
                (proto, rx)


def test_what_each_client_is_told_is_what_it_was_told():
    """The envelopes (protocols/*.from_upstream_error) read the one table: Claude Code still reads
    "prompt is too long" (and compacts), Chat gets context_length_exceeded, Gemini a 400."""
    llama = parse_error_body(400, RECOGNISED["exceeds the available context size"])
    assert pa.from_upstream_error(llama) == (400, "invalid_request_error",
                                             "prompt is too long: the request exceeds the available context size, "
                                             "try increasing it")
    ant = parse_error_body(400, RECOGNISED["prompt is too long"])
    assert po.from_upstream_error(ant) == (400, "invalid_request_error", "context_length_exceeded",
                                           "prompt is too long: 208310 tokens > 200000 maximum")
    assert pg.from_upstream_error(parse_error_body(413, RECOGNISED["context window"])) == (400, "context window exceeded")
    server = parse_error_body(500, _ant("internal error while checking whether the prompt is too long"))
    assert pa.from_upstream_error(server)[:2] == (500, "api_error")
    assert po.from_upstream_error(server)[2] is None
    assert pg.from_upstream_error(server)[0] == 500


def test_neutral_keeps_no_wording():
    """neutral/ reads envelopes; which words mean "context window" is a protocol fact."""
    import tokunseba.neutral.error as ne

    assert not [n for n in vars(ne) if n.startswith("CONTEXT") or "context" in n.lower()]
