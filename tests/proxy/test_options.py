"""The addon's options as data (proxy/options.py): each one added once, and their readers'
one-line errors."""

from __future__ import annotations

import pytest

from tokunseba.proxy.options import OPTIONS, keepalive_seconds, provider_hosts_of, stamp


def test_every_option_is_a_tokunseba_option_named_once():
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names)) and all(n.startswith("tokunseba_") for n in names)
    assert all(o.help for o in OPTIONS)


def test_keepalive_seconds():
    assert keepalive_seconds("2.5") == 2.5 and keepalive_seconds("0") == 0
    for bad in ("x", "-1", "inf", "nan"):
        with pytest.raises(ValueError, match="tokunseba_keepalive_s"):
            keepalive_seconds(bad)


def test_provider_hosts_of():
    assert provider_hosts_of(["LLM.internal=openai", "h:8080=anthropic"]) == {"llm.internal": "openai",
                                                                              "h:8080": "anthropic"}
    for bad in ("llm.internal", "=openai", "h=cohere"):
        with pytest.raises(ValueError, match="HOST\\[:PORT\\]=PROTOCOL"):
            provider_hosts_of([bad])


def test_stamp(tmp_path):
    f = tmp_path / "rules.yaml"
    assert stamp(str(f)) is None and stamp(None) is None
    f.write_text("x")
    assert stamp(str(f)) is not None


def test_each_option_is_owned_by_exactly_one_part_of_the_addon():
    """proxy/mitm.py chains its parts; each loads and configures its own options, and together
    they load every one of OPTIONS once (issue 28)."""
    from tokunseba.proxy.mitm import Tokunseba

    owned = [name for part in Tokunseba().parts for name in part.KEYS]
    assert sorted(owned) == sorted(o.name for o in OPTIONS)
