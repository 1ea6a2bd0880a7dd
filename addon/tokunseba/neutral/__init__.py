"""The neutral model every codec speaks (docs/architecture.md §3): N protocols cost 2N parts.

- ``events``: a reply as neutral events (message start, block start / delta / signature /
  stop for text, tool calls, thinking, other blocks; message stop with stop reason and
  usage; usage after the stop; an error);
- ``message``: a whole reply = its events collected (``Message.collect``);
- ``conversation``: a request (``Conversation``) and a request translation's result
  (``RequestTranslation``);
- ``usage``: usage exactly as reported, converted only where definitions differ;
- ``report``: drops / plumbing / warnings (``ReplyReport``, ``note_once``);
- ``error``: an upstream's error read from any envelope (``UpstreamError``);
- ``ids``: ids minted as recorded plumbing;
- ``output_format``: structured output (a JSON object, or one following a JSON Schema), the
  schema dialects converted on the way in and out.

Rules: ``neutral`` imports no codec (``translate``) and no ``protocols`` module; codecs and
protocol modules import it.
"""
