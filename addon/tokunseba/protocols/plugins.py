"""Finding the protocols: every protocol, the four built in included, is a plugin named in the
entry-point group ``tokunseba.protocols`` (docs/dev/architecture.md, "Adding a protocol").

An entry point names a function that is handed the registry's one seam and calls it once per
protocol it brings::

    # pyproject.toml of a package that ships a protocol
    [project.entry-points."tokunseba.protocols"]
    acme = "tokunseba_acme:register_protocols"

    # the package tokunseba_acme
    def register_protocols(register):
        register(FACTS, CODEC)          # its facts (protocols.facts.Protocol) and its codec
                                        # (or "module:CODEC": imported when first used)

The built-ins are declared the same way in tokunseba's own pyproject.toml. ``BUILTIN`` repeats
those four lines for a checkout run without installing (``mitmdump -s addon/tokunseba_addon.py``
from a fresh clone has no package metadata): a built-in missing from the installed metadata is
loaded from its line here, through the same load (``Declared.load``, as ``EntryPoint.load`` does). tests/suites/test_echo_plugin.py keeps
the two lists equal.

``TOKUNSEBA_PLUGINS`` chooses the outside plugins: unset, every installed one; a comma-separated
list of entry-point names, those only; empty, none. The built-ins always load.

A plugin that fails to load, or brings a protocol whose name is taken, is left out and said,
never a traceback: a warning in the log (mitmdump's event log, the CLI's stderr) and
``problems()`` (`tokunseba --help` lists them).

Start-up: asking ``importlib.metadata`` costs about 20 ms a process (its import, then a read of
every distribution's metadata), a tenth of what tokunseba adds to mitmdump's start. So the
entry-point files are first read straight from the ``*.dist-info``/``*.egg-info`` folders on
``sys.path`` (``_outsiders_declared``: a handful of small files); only when one of them declares
more than ``BUILTIN``'s lines, or a path entry is not a plain folder (a zip: unsure), is
``importlib.metadata`` asked, and it decides. With none, the built-ins load from ``BUILTIN``.

Contract: no codec import here (the entry points name them); ``load`` runs once, when
``tokunseba.protocols`` is first imported.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

GROUP = "tokunseba.protocols"
ENV = "TOKUNSEBA_PLUGINS"

# the built-in protocols, in their order (the first four everywhere): as pyproject.toml declares them
BUILTIN: dict[str, str] = {
    "anthropic": "tokunseba.protocols.anthropic:register_protocols",
    "openai": "tokunseba.protocols.openai_chat:register_protocols",
    "openai-responses": "tokunseba.protocols.openai_responses:register_protocols",
    "gemini": "tokunseba.protocols.gemini:register_protocols",
}



@dataclass(frozen=True)
class Declared:
    """An entry point of the group as a line declares it (``name = module:attr``): what
    ``importlib.metadata.EntryPoint`` is for a built-in, without importing that module."""

    name: str
    value: str
    group: str = GROUP

    def load(self) -> Any:
        module, _, attrs = self.value.partition(":")
        obj: Any = importlib.import_module(module.strip())
        for attr in filter(None, attrs.strip().split(".")):
            obj = getattr(obj, attr)
        return obj


def entry_points(group: str) -> list[Any]:
    """The group's entry points as ``importlib.metadata`` finds them (imported only here)."""
    from importlib.metadata import entry_points as found

    return list(found(group=group))


def _outsiders_declared(paths: Iterable[str] | None = None) -> bool:
    """Whether any distribution on ``paths`` (``sys.path``) may declare an entry point of the
    group beyond ``BUILTIN``'s lines: its ``entry_points.txt`` read directly. True when unsure (a
    path entry that is a file, e.g. a zip, or a file that cannot be read)."""
    ours = {f"{name}={value}" for name, value in BUILTIN.items()}
    for entry in sys.path if paths is None else paths:
        folder = entry or "."
        if os.path.isfile(folder):
            return True  # a zip or egg: importlib.metadata reads those
        try:
            names = [n for n in os.listdir(folder) if n.endswith((".dist-info", ".egg-info"))]
        except OSError:
            continue  # a path entry that does not exist: nothing there
        for name in names:
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                continue
            except OSError:
                return True
            if GROUP in text and _lines_of_group(text) - ours:
                return True
    return False


def _lines_of_group(text: str) -> set[str]:
    """The ``name=value`` lines (spaces removed) of the group's section of an entry_points.txt."""
    lines: set[str] = set()
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            inside = line == f"[{GROUP}]"
        elif inside and line and not line.startswith(("#", ";")):
            lines.add(line.replace(" ", ""))
    return lines


@dataclass(frozen=True)
class Origin:
    """Where a registered protocol came from: for `--help`, `check` and `models`."""

    plugin: str  # the entry point's name
    package: str | None  # the distribution that declared it (None: a built-in's line in BUILTIN)
    version: str | None
    builtin: bool = False  # one of tokunseba's own four

    def __str__(self) -> str:
        if self.builtin:
            return "built in"
        return f"plugin {self.plugin} ({self.package or '?'} {self.version or ''})".replace(" )", ")")


_problems: list[str] = []


def problems() -> list[str]:
    """What could not be loaded, and why (one line each)."""
    return list(_problems)


def wanted(env: str | None = None) -> frozenset[str] | None:
    """The outside plugins ``TOKUNSEBA_PLUGINS`` asks for (None: all of them)."""
    raw = os.environ.get(ENV) if env is None else env
    if raw is None:
        return None
    return frozenset(n.strip() for n in raw.split(",") if n.strip())


def discovered(only: Iterable[str] | None = None) -> list[Any]:
    """The group's entry points to load: the built-ins first in ``BUILTIN``'s order (the installed
    ones that say what ``BUILTIN`` says, else its lines), then the outside ones by name (those of
    ``only`` when given; one that takes a built-in's name for something else is loaded as an
    outsider, and refused when it registers a name already taken)."""
    ours: dict[str, Any] = {}
    theirs: list[Any] = []
    chosen = None if only is None else frozenset(only)
    if chosen == frozenset() or not _outsiders_declared():  # the built-ins only: importlib.metadata not asked
        return [Declared(name, value) for name, value in BUILTIN.items()]
    for ep in entry_points(group=GROUP):
        if BUILTIN.get(ep.name) == ep.value:  # ours (by its line: no package metadata read at start-up)
            ours[ep.name] = ep
        else:
            theirs.append(ep)
    return ([ours.get(name) or Declared(name, value) for name, value in BUILTIN.items()]
            + sorted((ep for ep in theirs if chosen is None or ep.name in chosen), key=lambda ep: ep.name))


def origin_of(ep: Any, builtin: bool = False) -> Origin:
    if builtin:
        return Origin(ep.name, "tokunseba", None, True)
    dist = getattr(ep, "dist", None)
    return Origin(ep.name, dist.name if dist is not None else None, dist.version if dist is not None else None,
                  builtin)


def load(register: Callable[[Any, Any, Origin], Any], only: Iterable[str] | None = None) -> list[str]:
    """Load the plugins (``discovered(only)``; ``only`` defaults to ``wanted()``), each calling
    ``register(facts, codec)``; ``register`` here also gets the plugin's ``Origin``. Returns the
    problems of this load (also kept for ``problems()``)."""
    found: list[str] = []
    for i, ep in enumerate(discovered(wanted() if only is None else only)):
        where = origin_of(ep, builtin=i < len(BUILTIN))  # discovered() puts the built-ins first
        try:
            hook = ep.load()
            hook(lambda facts, codec=None: register(facts, codec, where))
        except Exception as e:  # a broken plugin is left out and said, the product runs on
            if where.builtin:
                raise  # a built-in that does not load is tokunseba's own bug: never hidden
            found.append(f"protocol plugin {ep.name!r} ({ep.value}) not loaded: {type(e).__name__}: {e}")
            import logging  # only when something is wrong (start-up time)

            logging.getLogger(__name__).warning("tokunseba: %s", found[-1])
    _problems.extend(found)
    return found
