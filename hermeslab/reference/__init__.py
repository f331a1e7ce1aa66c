"""The Hermes reference: the real hermes-agent 0.19.0 compressor run beside hermeslab, reporting its decisions.

Parity tests and benchmarks compare hermeslab's compression with what Hermes
itself does, by running Hermes rather than re-deriving its rules. Hermes pins
library versions hermeslab must not inherit, so the reference is kept apart
from the rest of hermeslab:

- ``venv``: the virtualenv that holds hermes-agent.
- ``install``: ``hermeslab reference install``, the one step that installs it
  (and OpenHands' virtualenvs), announcing the download first.
- ``worker``: the program that runs inside that virtualenv, instruments
  Hermes's compressor and answers JSON-line requests.
- ``client``: ``HermesReference``, which starts the worker and talks to it.

``errors`` holds the exceptions the virtualenv setup and the client raise.
"""
