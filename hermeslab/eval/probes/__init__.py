"""The probe exam: what a model can still answer after a compaction, against controls.

``bank`` writes probes from the transcript (five types, gold cut from what the
compaction removed), ``context`` gives the three arms a probe is asked in
(``compacted``, ``ceiling``, ``floor``), ``readers`` answer (the perfect reader,
any OpenAI-compatible endpoint), ``written`` adds questions a model writes (the
sixth source), ``judge`` scores 2/1/0, ``cache`` keeps every answer, judgement
and written question list in the lab, and ``run`` puts them together.

What the statistics read from ``run.run_exam``'s frame: a probe's id hashes
its recording, type, question and gold (not the config or window), so the same
probe under two configs pairs on (``recording_id``, ``window``, ``probe_id``,
``arm``); ``compaction`` indexes ``context.effective_compactions`` (several
compressions before one answered call are one); rows not scored (unfittable,
failed) have NaN ``points``. Token columns are in the unit their ``token_unit``
names; ``run_exam(counter="tiktoken")`` bills every session in one unit.
"""
