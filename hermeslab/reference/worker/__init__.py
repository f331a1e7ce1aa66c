"""The Hermes reference worker: a program that runs under the Hermes virtualenv's Python, not inside hermeslab.

hermes-agent pins library versions that hermeslab must not inherit, so the
worker runs as ``python -I <this directory>`` (``__main__``) in the
virtualenv of ``hermeslab.reference.venv``, and imports only the standard
library, Hermes, and its sibling modules. Isolated mode keeps the current
directory and user site-packages off ``sys.path``, but Python still puts a
directory it runs first on the path, so the siblings import one another by
their top-level names; their names are chosen not to collide with any
top-level module of hermes-agent or its dependencies.

- ``request_protocol``: the JSON-line requests and replies.
- ``reference_engine``: Hermes's compressor, instrumented, and the operations on it.
- ``compress_probe``: what one ``compress()`` call decided, read from the instrumentation.
- ``stub_summary``: the stand-in summary text, which hermeslab's own replays share,
  and ``message_digest``: what session parity compares message by message (the two
  modules hermeslab imports from here).
- ``texts_dump``: run on its own, prints the texts Hermes writes into a conversation
  (``hermeslab.context.hermes_texts`` reads them once per install).
"""
