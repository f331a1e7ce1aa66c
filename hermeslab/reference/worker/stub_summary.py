"""The fixed text the reference worker's stand-in summariser answers with.

Hermes's summary call never reaches a model: the worker answers it with this
text, so no request leaves the machine and two compression engines differ
only in what they decide to keep. hermeslab's own replays
(``hermeslab.eval.replay_compression.FixedSummariser``) answer with the same
text, which is why it lives in a module of its own that imports nothing: the
worker loads it by its top-level name inside the Hermes virtualenv, hermeslab
as ``hermeslab.reference.worker.stub_summary``.
"""

# The stand-in summariser's answer: a fixed text about the size of a short real
# summary (Hermes's template headings, neutral placeholder lines). Its length
# matters, because the summary stays in the context and is counted by every
# later trigger check. Hermes still post-processes it (grounds the task
# snapshot, adds its prefix and end marker), exactly as it would a model's.
_STUB_SECTIONS = (
    ("Historical Task Snapshot", "Placeholder; Hermes replaces this section with the newest real user request."),
    ("Goal", "Carry on with the task described by the user, continuing from the current state of the work."),
    ("Constraints & Preferences", "None recorded beyond what the user wrote in the kept messages."),
    (
        "Completed Actions",
        "1. INSPECT the working tree and the relevant sources - outcome noted [tool: unknown]\n"
        "2. RUN the commands the task needed - results are in the kept messages [tool: unknown]",
    ),
    (
        "Active State",
        "Working directory, modified files and running processes as left by the earlier turns of this conversation.",
    ),
    ("Historical In-Progress State", "Earlier work was still in progress when these turns were compacted."),
    ("Blocked", "Nothing is known to be blocked; errors seen earlier were handled or are repeated below."),
    ("Key Decisions", "Keep following the approach the assistant had chosen before this point in the conversation."),
    ("Resolved Questions", "None recorded in the compacted turns."),
    ("Historical Pending User Asks", "Stale; the newest user message after this summary wins."),
    ("Relevant Files", "The files named in the kept messages and in the commands that were run earlier."),
    ("Historical Remaining Work", "Stale; re-derive the next step from the latest messages."),
    (
        "Critical Context",
        "Fixed stand-in text from the hermeslab reference worker; no model wrote it, so it holds no facts.",
    ),
)
STUB_SUMMARY = "\n\n".join(f"## {title}\n{line}" for title, line in _STUB_SECTIONS) + "\n"
