"""Entry point for `mitmdump -s addon/tokunseba_addon.py` (and mitmweb).

Options (set with `--set name=value`):
  tokunseba_rules=FILE          routing rules (YAML); empty = pass everything through
  tokunseba_ledger=PATH         ledger database (default $TOKUNSEBA_HOME/ledger.db)
  tokunseba_ledger_bodies=true  also store request/response bodies (key headers never stored)
  tokunseba_allow_remote_clients=true  route turns of non-loopback clients without proxyauth
The package lives beside this file (addon/ is the source root), so this works from a
checkout even without installing it; `tokunseba run` starts exactly this.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

from tokunseba.proxy.mitm import DisplayRedaction, Tokunseba  # noqa: E402

_main = Tokunseba()
addons = [_main, DisplayRedaction(_main)]  # in this order: redaction runs after the turn is finished
