"""Other agents' own compaction code, run in virtualenvs of their own, beside the zoo policies that reproduce it."""
