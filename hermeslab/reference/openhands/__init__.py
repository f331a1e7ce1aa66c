"""The OpenHands reference: OpenHands' own condensers run beside hermeslab's ``openhands-*`` presets.

- ``venv``: one virtualenv per OpenHands release (the SDK, and openhands-ai 0.62
  for the condensers the SDK dropped), installed only by
  ``hermeslab reference install openhands``.
- ``worker``: the program that runs inside such a virtualenv, steps a recording
  through a condenser as OpenHands' agent steps, and answers JSON lines.
- ``client``: ``OpenHandsReference``, which starts the worker and talks to it.
- ``steps``: hermeslab's side, the same recording stepped through a preset's
  context driver, recorded in the worker's format.
- ``compare``: the two records set side by side, step by step.
"""
