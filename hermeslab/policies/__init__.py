"""Compaction policies: one module per agent, each exporting a ``POLICY`` (see ``base``)."""
