"""hermeslab's results written in other tools' formats, the counterpart of ``eval.importers``.

* ``inspect_log`` — messages, token usage, scores and whole logs as Inspect AI's types (pure);
* ``inspect_lab`` — a lab's conversations as Inspect evaluations, one per model;
* ``inspect_ab`` — an A/B run as one Inspect evaluation per config;
* ``inspect_exam`` — a probe exam as one Inspect evaluation per config, window and arm;
* ``inspect_files`` — writing a batch of logs into a folder, whole or not at all.

inspect-ai is an optional extra (``pip install 'hermeslab[inspect]'``), imported only when a log is built.
"""
