"""Echo Meter: a protocol shipped as its own package, found by tokunseba through the
entry-point group ``tokunseba.protocols`` (this package's pyproject.toml). Nothing in
tokunseba names it: its facts (facts.py, with its own usage counting) and its codec
(codec.py) join through the one seam, ``register(facts, codec)``."""

from __future__ import annotations

from collections.abc import Callable

from . import codec, facts


def register_protocols(register: Callable[..., object]) -> None:
    """The plugin: tokunseba calls it with ``protocols.register``."""
    register(facts.FACTS, codec.CODEC)
