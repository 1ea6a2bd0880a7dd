"""The Gemini codec (generativelanguage ``generateContent`` / ``streamGenerateContent``):
one package per protocol over the neutral model (design.md §3, issue 11).

- ``stream``: Gemini SSE (whole ``GenerateContentResponse`` objects) <-> neutral events;
- ``reply``: a whole Gemini reply <-> neutral events (the same decoder and encoder);
- ``errors``: Google's error envelope both ways;
- ``request``: a Gemini request <-> the neutral (Chat-shaped) request, by field tables.

No module here imports another protocol's codec.
"""
