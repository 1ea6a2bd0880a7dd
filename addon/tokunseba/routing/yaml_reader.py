"""The YAML node walker both YAML files share (the rules file, routing/rules_file.py; the price
table, pricing/table.py): every mistake is collected as one line ``FILE:LINE: what is wrong``, in file
order, so a file is reported whole rather than at its first problem.

Contract: reads composed nodes (``yaml.compose`` with the safe loader), so each error has its
node's line; a scalar is constructed only once its YAML type is checked (``value``), with the
safe constructor; ``mapping`` checks keys (unknown, duplicate). Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

# the YAML core tags a value is judged by
BOOL_TAG, INT_TAG, FLOAT_TAG, NULL_TAG = (f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float", "null"))

Entries = dict[str, tuple[Node, Node]]  # a mapping as read: {key: (key node, value node)}


def is_null(node: Node) -> bool:
    """An empty value (``key:`` with nothing after it, or ``null``)."""
    return node.tag == NULL_TAG


class YamlReader:
    """Walks the composed YAML nodes, collecting errors with their lines."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[tuple[int, str]] = []
        self.aliased: list[str] = []  # routes that say on_unreachable (on_failure's older name)
        self._con = SafeConstructor()

    def line(self, node: Node) -> int:
        return node.start_mark.line + 1

    def error(self, node: Node | int, msg: str) -> None:
        line = node if isinstance(node, int) else self.line(node)
        self.problems.append((line, f"{self.source}:{line}: {msg}"))

    @property
    def errors(self) -> list[str]:
        """Every problem, in file order."""
        return [m for _, m in sorted(self.problems, key=lambda p: p[0])]

    @staticmethod
    def got(node: Node) -> str:
        """What a node holds, as an error says it."""
        if isinstance(node, MappingNode):
            return "a mapping"
        if isinstance(node, SequenceNode):
            return "a list"
        return "nothing" if node.tag == NULL_TAG else repr(node.value)

    def number(self, node: Node) -> int | float | None:
        """A YAML int or float as a Python number; None when the node is not one (no error said)."""
        if isinstance(node, ScalarNode) and node.tag in (INT_TAG, FLOAT_TAG):
            return self._con.construct_object(node)
        return None

    def mapping(self, node: Node, what: str, allowed: tuple[str, ...] | None) -> Entries | None:
        """{key: (key node, value node)}; unknown or duplicate keys are errors."""
        if not isinstance(node, MappingNode):
            self.error(node, f"{what} must be a mapping, got {self.got(node)}")
            return None
        out: Entries = {}
        for k, v in node.value:
            if not isinstance(k, ScalarNode) or k.tag == NULL_TAG:
                self.error(k, f"{what}: keys must be plain names, got {self.got(k)}")
            elif k.value in out:
                first = self.line(out[k.value][0])
                self.error(k, f"{what}: duplicate key {k.value!r} (first at line {first})")
            elif allowed is not None and k.value not in allowed:
                self.error(k, f"{what}: unknown key {k.value!r} (expected one of: {', '.join(allowed)})")
            else:
                out[k.value] = (k, v)
        return out

    def value(self, node: Node, kind: str, what: str) -> Any:
        """A scalar of ``kind`` ("text" | "int" | "number" | "bool" | "texts"), or None after an error."""
        if kind == "texts" and isinstance(node, SequenceNode):
            items = [self.value(n, "text", what) for n in node.value]
            if not items:
                self.error(node, f"{what} must not be an empty list")
            return items if items and None not in items else None
        ok = isinstance(node, ScalarNode) and {
            "text": node.tag not in (NULL_TAG, BOOL_TAG) and node.value != "",
            "texts": node.tag not in (NULL_TAG, BOOL_TAG) and node.value != "",
            "int": node.tag == INT_TAG,
            "number": node.tag in (INT_TAG, FLOAT_TAG),
            "bool": node.tag == BOOL_TAG,
        }[kind]
        if not ok:
            wanted = {"text": "a string", "texts": "a string or a list of strings", "int": "an integer",
                      "number": "a number", "bool": "true or false"}[kind]
            self.error(node, f"{what} must be {wanted}, got {self.got(node)}")
            return None
        if kind in ("int", "bool", "number"):
            return self._con.construct_object(node)
        return [node.value] if kind == "texts" else node.value

    def entry_name(self, m: dict, node: Node, kind: str, i: int, first: dict[str, int]) -> str | None:
        """The ``name:`` of entry #``i`` of a list (a route, a budget): a missing or duplicate
        one is said (a duplicate with the line of the first); ``first`` keeps each name's line."""
        name = self.value(m["name"][1], "text", f"{kind} #{i}: name") if "name" in m else None
        if "name" not in m:
            self.error(node, f"{kind} #{i} has no 'name'")
        elif name in first:
            self.error(m["name"][1], f"duplicate {kind} name {name!r} (first at line {first[name]})")
        elif name is not None:
            first[name] = self.line(node)
        return name
