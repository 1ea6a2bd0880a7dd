"""The YAML node walker both YAML files share (routing/yaml_reader.py): every mistake one line
``FILE:LINE: what is wrong``, reported in file order whatever order they were found in; scalars
judged by their YAML type before they are built; unknown and duplicate keys said."""

from __future__ import annotations

import yaml

from tokunseba.routing.yaml_reader import YamlReader, is_null


def nodes(text: str):
    return yaml.compose(text, Loader=yaml.SafeLoader)


def test_errors_are_in_file_order_with_their_lines():
    r = YamlReader("f.yaml")
    root = nodes("a: 1\nb: x\nc: true\n")
    entries = r.mapping(root, "top", ("a", "b", "c"))
    r.value(entries["c"][1], "int", "c")  # found first, line 3
    r.value(entries["b"][1], "int", "b")  # line 2
    assert r.errors == ["f.yaml:2: b must be an integer, got 'x'", "f.yaml:3: c must be an integer, got 'true'"]


def test_unknown_duplicate_and_non_plain_keys():
    r = YamlReader("r.yaml")
    entries = r.mapping(nodes("a: 1\nzz: 2\na: 3\n? [1]\n: 4\n"), "top", ("a",))
    assert set(entries) == {"a"} and entries["a"][1].value == "1"  # the first one kept
    assert r.errors == ["r.yaml:2: top: unknown key 'zz' (expected one of: a)",
                        "r.yaml:3: top: duplicate key 'a' (first at line 1)",
                        "r.yaml:4: top: keys must be plain names, got a list"]
    r2 = YamlReader("r.yaml")
    assert r2.mapping(nodes("- 1\n"), "routes[0]", None) is None
    assert r2.errors == ["r.yaml:1: routes[0] must be a mapping, got a list"]


def test_scalars_are_built_only_once_their_type_is_checked():
    r = YamlReader("v.yaml")
    m = r.mapping(nodes("i: 0x10\nf: 1.5\nb: false\nt: hello\nq: '12'\nn:\nl: [a, b]\ne: []\n"), "v", None)
    assert r.value(m["i"][1], "int", "i") == 16
    assert r.value(m["f"][1], "number", "f") == 1.5 and r.number(m["i"][1]) == 16 and r.number(m["t"][1]) is None
    assert r.value(m["b"][1], "bool", "b") is False
    assert r.value(m["t"][1], "text", "t") == "hello" and r.value(m["q"][1], "text", "q") == "12"  # a quoted number is text
    assert r.value(m["t"][1], "texts", "t") == ["hello"] and r.value(m["l"][1], "texts", "l") == ["a", "b"]
    assert r.errors == []
    assert r.value(m["n"][1], "text", "n") is None and is_null(m["n"][1])
    assert r.value(m["b"][1], "text", "b") is None  # a bool is no text
    assert r.value(m["e"][1], "texts", "e") is None
    assert r.errors == ["v.yaml:3: b must be a string, got 'false'", "v.yaml:6: n must be a string, got nothing",
                        "v.yaml:8: e must not be an empty list"]


def test_entry_names_missing_or_duplicate():
    r = YamlReader("n.yaml")
    seq = nodes("- {name: a}\n- {to: x}\n- {name: a}\n")
    first: dict[str, int] = {}
    names = [r.entry_name(r.mapping(n, f"route #{i}", None), n, "route", i, first) for i, n in enumerate(seq.value)]
    assert names == ["a", None, "a"] and first == {"a": 1}
    assert r.errors == ["n.yaml:2: route #1 has no 'name'", "n.yaml:3: duplicate route name 'a' (first at line 1)"]
