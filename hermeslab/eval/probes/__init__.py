"""The probe exam: what a model can still answer after a compaction, against controls.

``bank`` writes probes from the transcript (five types, gold cut from what the
compaction removed), ``context`` gives the three arms a probe is asked in
(``compacted``, ``ceiling``, ``floor``), ``readers`` answer (the perfect reader,
any OpenAI-compatible endpoint), ``written`` adds questions a model writes (the
sixth source), ``judge`` scores 2/1/0, ``cache`` keeps every answer, judgement
and written question list in the lab, and ``run`` puts them together.
"""
