"""Shadow turns and replays: a turn sent again, to another endpoint or later, and compared.

- ``sender``: sends shadow turns in the background, off every flow's path, and records them
  (which turns a shadow can take is routing/shadowable.py's: the rules warn with it at load);
- ``turns``: the pure part — which turns to shadow, the request a shadow (or a replay)
  sends, the reply in the client's protocol, the comparison of two replies;
- ``view``: how ``explain`` shows a shadowed or replayed turn;
- ``replay``: a recorded turn sent again (``tokunseba replay``);
- ``reply_facts``: the facts of one reply (text, tool calls, stop, usage) that are compared.

Contract: a shadow never changes what the client gets; no mitmproxy here.
"""
