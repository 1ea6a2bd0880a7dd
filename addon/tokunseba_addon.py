"""Entry point for `mitmdump -s addon/tokunseba_addon.py` (and mitmweb).

Options (set with `--set name=value`):
  tokunseba_rules=FILE          routing rules (YAML); empty = pass everything through
  tokunseba_ledger=PATH         ledger database (default $TOKUNSEBA_HOME/ledger.db)
  tokunseba_ledger_bodies=true  also store request/response bodies (key headers never stored)
The package lives beside this file (addon/ is the source root), so this works from a
checkout even without installing it; `tokunseba run` starts exactly this.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

from tokunseba.mitm import Tokunseba  # noqa: E402

addons = [Tokunseba()]
