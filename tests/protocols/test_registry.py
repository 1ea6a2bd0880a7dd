"""The protocol registry's two tables (protocols/registry.py): ``REGISTRY`` in registration order and
``GENERATION``, bumped on every registration and removal so derived tables rebuild; the module
reads no package (no import circle)."""

from __future__ import annotations

import ast
from pathlib import Path

from tokunseba import protocols
from tokunseba.protocols import registry

from tests.toy import codec as tc
from tests.toy import facts as tf


def test_the_built_in_protocols_in_registration_order():
    assert list(registry.REGISTRY)[:4] == ["anthropic", "openai", "openai-responses", "gemini"]
    assert all(name == facts.name for name, facts in registry.REGISTRY.items())
    assert protocols.NAMES == registry.REGISTRY.keys()


def test_registering_and_removing_bump_the_generation():
    before = registry.GENERATION[0]
    assert protocols.generation() == before
    protocols.register(tf.FACTS, tc.CODEC)
    try:
        assert registry.GENERATION[0] == before + 1
        assert list(registry.REGISTRY)[-1] == tf.NAME and registry.REGISTRY[tf.NAME] is tf.FACTS
    finally:
        protocols.unregister(tf.NAME)
    assert registry.GENERATION[0] == before + 2 and tf.NAME not in registry.REGISTRY
    protocols.unregister(tf.NAME)  # removing what is not there changes nothing
    assert registry.GENERATION[0] == before + 2


def test_it_imports_only_the_facts_module():
    tree = ast.parse(Path(registry.__file__).read_text())
    imported = [(n.level, n.module) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module != "__future__"]
    assert imported == [(1, "facts")] and not any(isinstance(n, ast.Import) for n in ast.walk(tree))
