"""A small stdio MCP server for the Codex end-to-end tests: one tool, ``read_note(name)``,
answering the note's text (JSON-RPC 2.0, one message a line, as MCP's stdio transport)."""

from __future__ import annotations

import json
import sys

NOTES = {"greeting": "hello from the MCP note"}


def reply(mid: object, result: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        m = json.loads(line)
        method, mid = m.get("method"), m.get("id")
        if method == "initialize":
            reply(mid, {"protocolVersion": m["params"].get("protocolVersion", "2025-06-18"),
                        "capabilities": {"tools": {}}, "serverInfo": {"name": "notes", "version": "1.0"}})
        elif method == "tools/list":
            reply(mid, {"tools": [{"name": "read_note", "description": "Read a note by name.",
                                   "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                                                   "required": ["name"]}}]})
        elif method == "tools/call":
            text = NOTES.get(m["params"].get("arguments", {}).get("name"), "no such note")
            reply(mid, {"content": [{"type": "text", "text": text}], "isError": False})
        elif mid is not None:  # a request this server does not implement: an empty result
            reply(mid, {})


if __name__ == "__main__":
    main()
