"""The field-table runner and the JSON-path validators every request codec uses
(translate/fieldtable.py): known fields applied in table order, every unknown field recorded as
dropped, nulls carried as nothing; each bad value a 400 naming its JSON path, before any body
exists; a tool name too long refused, never renamed."""

from __future__ import annotations

import pytest

from tokunseba.errors import InvalidRequest, Refused
from tokunseba.neutral.conversation import RequestTranslation
from tokunseba.translate import fieldtable as ft


def record() -> RequestTranslation:
    return RequestTranslation({})


@pytest.mark.parametrize(("check", "value", "want"), [
    (ft.obj, [], "expected an object, got array"), (ft.arr, {}, "expected an array, got object"),
    (ft.string, 5, "expected a string, got number"), (ft.boolean, "yes", "expected a boolean, got string"),
    (ft.integer, True, "expected an integer, got boolean"), (ft.integer, 1.5, "expected an integer, got number"),
    (ft.number, None, "expected a number, got null"), (ft.number, False, "expected a number, got boolean"),
])
def test_each_validator_names_the_path_and_what_it_got(check, value, want):
    with pytest.raises(InvalidRequest) as e:
        check(value, "messages[2].content")
    assert (e.value.status, e.value.message) == (400, f"messages[2].content: {want}")


def test_validators_return_a_good_value():
    assert ft.integer(3, "p") == 3 and ft.number(2.5, "p") == 2.5 and ft.string("s", "p") == "s"
    assert ft.anything(object, "p") is object


def test_required_and_optional_keys():
    assert ft.req({"a": "x"}, "a", "tools[0]", ft.string) == "x"
    with pytest.raises(InvalidRequest, match=r"^tools\[0\]\.name: required$"):
        ft.req({"name": None}, "name", "tools[0]", ft.string)
    with pytest.raises(InvalidRequest, match=r"^name: expected a string, got number$"):
        ft.req({"name": 1}, "name", "", ft.string)
    assert ft.opt({}, "a", "p", ft.integer) is None
    with pytest.raises(InvalidRequest, match=r"^p\.a: expected an integer"):
        ft.opt({"a": "1"}, "a", "p", ft.integer)


def test_pick_and_choice_name_the_known_values():
    assert ft.pick({"auto": 1}, "auto", "tool_choice", "tool choice") == 1
    with pytest.raises(InvalidRequest) as e:
        ft.pick({"auto": 1, "none": 2}, "sometimes", "tool_choice", "tool choice")
    assert e.value.message == "tool_choice: unknown tool choice 'sometimes' (expected one of 'auto', 'none')"
    assert ft.choice("low", ("low", "high"), "p", "effort") == "low"
    with pytest.raises(InvalidRequest, match=r"unknown effort 7"):
        ft.choice(7, ("low", "high"), "p", "effort")


def test_the_runner_applies_the_table_and_records_every_unknown_field():
    seen = []

    def convert(rt, path, value, out, o):
        seen.append(path)
        out["max_completion_tokens"] = min(value, o.max_tokens_cap or value)

    table = {"model": ("mapped", "model", "as is"), "max_tokens": ("converted", convert, "renamed, capped"),
             "metadata": ("dropped", None, "no such field there"), "top_k": ("dropped", None, "no such field")}
    rt = record()
    body = {"zzz": 1, "top_k": None, "metadata": {"user_id": "u"}, "max_tokens": 900, "model": "m", "aaa": 2}
    out = ft.run(table, ft.CHECKS, body, rt, ft.Options(max_tokens_cap=512))
    assert out == {"model": "m", "max_completion_tokens": 512} and seen == ["max_tokens"]
    assert rt.dropped == ["metadata", "zzz", "aaa"]  # table order, then unknown fields in the body's order
    with pytest.raises(InvalidRequest, match="^model: expected a string, got number$"):
        ft.run(table, ft.CHECKS, {"model": 1}, record(), ft.Options())


def test_extras_record_unknown_keys_of_an_object():
    rt = record()
    ft.extras(rt, {"type": "function", "strict": True}, frozenset({"type"}), "tools[0]")
    ft.extras(rt, {"a": 1, "x": 2, "y": 3}, frozenset({"a"}), "")
    ft.extras(rt, {"a": 1}, frozenset({"a"}), "p")
    assert rt.dropped == ["tools[0].strict", "x", "y"]


def test_each_part_by_its_type():
    handlers = {"text": lambda rt, x, p: x["text"], "skip": lambda rt, x, p: None}
    assert ft.each_part(record(), [{"type": "text", "text": "a"}, {"type": "skip"}], "content", handlers) == ["a"]
    with pytest.raises(InvalidRequest, match=r"^content\[1\]\.type: unknown content part type 'video'"):
        ft.each_part(record(), [{"type": "text", "text": "a"}, {"type": "video"}], "content", handlers)
    with pytest.raises(InvalidRequest, match=r"^content\[0\]: expected an object, got string"):
        ft.each_part(record(), ["x"], "content", handlers)


def test_a_tool_name_too_long_refuses_the_turn():
    assert ft.name_within("f" * 64, "tools[0].name", 64, "OpenAI Chat") == "f" * 64
    with pytest.raises(Refused) as e:
        ft.name_within("f" * 65, "tools[0].name", 64, "OpenAI Chat")
    assert "has 65 characters; OpenAI Chat accepts at most 64, and renaming it would invent a tool" in e.value.message


def test_data_urls():
    assert ft.data_url("data:image/png;base64,iVBO", "p") == ("image/png", "iVBO")
    assert ft.data_url("data:application/pdf;name=a.pdf;base64,JVBE", "p") == ("application/pdf", "JVBE")
    for url, why in [("https://x.test/a.png", "expected a URL or a base64 data: URL"),
                     ("data:image/png,raw", "expected a URL or a base64 data: URL"),
                     ("data:;base64,AA", "data: URL without a media type")]:
        with pytest.raises(InvalidRequest, match=f"^p: {why}$"):
            ft.data_url(url, "p")


def test_the_body_and_the_model():
    with pytest.raises(InvalidRequest, match="^Chat request body must be a JSON object, got array$"):
        ft.check_body([], "Chat")
    with pytest.raises(InvalidRequest, match="^messages: required$"):
        ft.check_body({"model": "m"}, "Chat")
    rt = record()
    assert list(ft.finish_model(rt, {"temperature": 1, "model": "a"}, "b")) == ["model", "temperature"]
    assert rt.converted == ["model -> 'b' (route/endpoint model; client asked 'a')"]
    with pytest.raises(InvalidRequest, match="^model: required$"):
        ft.finish_model(record(), {}, None)


def test_a_dropped_object_is_recorded_key_by_key():
    rt = record()
    ft.drop_keys(rt, "metadata", {"user_id": "u", "x": 1}, {}, ft.Options())
    ft.drop_keys(rt, "service_tier", "auto", {}, ft.Options())
    assert rt.dropped == ["metadata.user_id", "metadata.x", "service_tier"]
