"""The protocol registry's two tables, apart from the package's ``__init__`` so that a module of
the package reads them without importing the package (no import circle): ``REGISTRY`` (name ->
``Protocol``, in registration order) and ``GENERATION`` (a one-item change counter, bumped on
every registration, so derived tables such as detect's regexes rebuild). Filled and changed only
by ``tokunseba.protocols.register`` / ``unregister``."""

from __future__ import annotations

from .facts import Protocol

REGISTRY: dict[str, Protocol] = {}
GENERATION = [0]
