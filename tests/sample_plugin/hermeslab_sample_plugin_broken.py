"""A plug-in whose import fails, as one with a missing dependency does."""

raise ImportError("hermeslab-sample-plugin needs a package that is not installed")
