"""What every reference worker does the same way, run under another project's Python (see ``jsonl_worker_loop``).

Workers put this folder on their import path and import the module by name;
nothing here imports hermeslab or anything outside the standard library.
"""
