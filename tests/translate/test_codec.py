"""What a codec is (translate/codec.py): each registered protocol's ``Codec`` is for its own protocol,
gives every part a pair needs (requests, whole replies, streams, errors), and says what its turns are
still refused for; a whole upstream reply that is no JSON object is a 502, never a traceback."""

from __future__ import annotations

import dataclasses

import pytest

from tokunseba import translate
from tokunseba.errors import UntranslatableReply
from tokunseba.neutral.report import ReplyReport
from tokunseba.translate.codec import Codec, ReplyTranslation, parse_reply

BUILT_IN = ("anthropic", "openai", "openai-responses", "gemini")


@pytest.mark.parametrize("name", BUILT_IN)
def test_each_built_in_codec_is_for_its_own_protocol_and_complete(name):
    codec = translate.CODECS[name]
    assert isinstance(codec, Codec) and codec.protocol == name
    for f in ("decode_request", "encode_request", "decode_reply", "encode_reply", "stream_decoder", "stream_encoder",
              "encode_error"):
        assert callable(getattr(codec, f)), f
    assert all(isinstance(r, str) and r for r in (*codec.refused_leaving, *codec.refused_arriving))


def test_only_gemini_carries_the_model_in_the_url():
    assert [n for n in BUILT_IN if translate.CODECS[n].url_carries_model] == ["gemini"]


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_stream_decoder_and_encoder_have_the_parts_the_translator_reads(name):
    codec = translate.CODECS[name]
    dec = codec.stream_decoder(ReplyReport())
    enc = codec.stream_encoder(ReplyReport(), True, 1)
    assert hasattr(dec, "usage") and callable(dec.on_event) and callable(dec.close)
    assert enc.finished is False and hasattr(enc, "client_usage") and callable(enc.encode)


def test_a_reply_that_is_no_json_object_is_a_502():
    assert parse_reply(b'{"id": "x"}', "Chat") == {"id": "x"}
    with pytest.raises(UntranslatableReply) as e:
        parse_reply(b"<html>", "Chat")
    assert e.value.status == 502 and e.value.message.startswith("the upstream's Chat reply is not valid JSON (")
    with pytest.raises(UntranslatableReply, match="^the upstream's Gemini reply is not a JSON object$"):
        parse_reply(b"[1, 2]", "Gemini")


def test_a_codec_is_immutable_and_a_reply_translation_keeps_its_lists_apart():
    with pytest.raises(dataclasses.FrozenInstanceError):
        translate.CODECS["openai"].protocol = "x"  # type: ignore[misc]
    a, b = ReplyTranslation(b"", None, None, None), ReplyTranslation(b"", None, None, None)
    a.dropped.append("x")
    assert b.dropped == [] and b.message is None and b.converted == []
