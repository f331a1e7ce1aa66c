"""Compaction policies: one module per agent, each exporting a ``POLICY`` (see ``base``).

``registry`` reads them and the plug-ins of the entry-point group
``hermeslab.policies``; ``loading`` resolves a config with its preset;
``running`` builds the compactor, the budgets and the effective values with the
rules of the config's strategy.
"""
