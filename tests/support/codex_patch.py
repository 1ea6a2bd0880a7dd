"""A Codex apply_patch call as its freeform tool's input (JavaScript holding a patch with quotes,
backslashes and non-ASCII): shared by the Codex tool tests."""

from __future__ import annotations

import json

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi \"there\" \\ é 😀\n*** End Patch\n"
JS = "const r = await tools.apply_patch(" + json.dumps(PATCH) + ");\ntext(r);"
