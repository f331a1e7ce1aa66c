"""The conversation behind the magics: one Runtime, one job at a time, never blocking the kernel.

A ``%%hermes`` cell creates a CellJob and, inside a kernel, starts it as an
asyncio task on the kernel's own loop and returns at once. The task waits for
the chat's previous job (turns never interleave), then runs the agent on a
worker thread. Outside an event loop (a plain script or terminal IPython) the
cell waits for the worker thread, and Ctrl-C stops the turn.

Since the kernel is free while a turn runs, ``%hermes stop`` from any cell and
Kernel → Interrupt (through an InterruptRelay) stop it too, which matters after
a page reload: the reloaded page no longer receives the old cell's updates.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from IPython.display import display as ipython_display

from ..core.config import Config
from ..core.events import CompressionEvent, Event
from ..runtime import Runtime
from .budget import BudgetMeter
from .job import CellJob
from .settings import RUNTIME_TRAITS, Hermes
from .widgets import TokenBudget

#: How long a kernel shutting down waits for the running turn to stop and be logged.
EXIT_GRACE_SECONDS = 5.0


class ChatBusyError(RuntimeError):
    """A command that changes the conversation was given while a turn is running."""


@dataclass
class Status:
    """What ``%hermes status`` reports."""

    session_id: str
    title: str | None
    lineage: list[str]
    turns: int
    compressions: int
    tokens: int
    context_length: int
    threshold: int | None
    model: str
    lab: Path | None
    running: bool
    #: What the server said that changes how the calls read (a chat template that drops the tools); None: nothing.
    server_note: str | None = None

    def lines(self) -> list[str]:
        context = f"{self.tokens:,} / {self.context_length:,} tokens ({self.tokens / self.context_length:.1%})"
        if self.threshold:
            context += f" · compression threshold {self.threshold:,} ({self.tokens / self.threshold:.0%} of it)"
        return [
            f"session      {self.session_id}" + (f" · {self.title}" if self.title else ""),
            f"lineage      {' → '.join(self.lineage)}",
            f"turns        {self.turns} · compressions {self.compressions}" + (" · a turn is running" if self.running
                                                                                  else ""),
            f"context      {context}",
            f"model        {self.model} · lab {self.lab if self.lab else 'off'}",
            *([f"server       {self.server_note}"] if self.server_note else []),
        ]


class NotebookChat:
    """What ``%%hermes`` and ``%hermes`` act on. ``task`` is the latest job's asyncio task."""

    def __init__(self, settings: Hermes, *, display: Callable[..., Any] = ipython_display):
        self.settings = settings
        #: ``%hermes config key=value`` overrides, applied over the settings.
        self.overrides: dict[str, Any] = {}
        self.gauge = TokenBudget(BudgetMeter(context_length=Config().model.context_length))
        self.task: asyncio.Task | None = None
        self.last_job: CellJob | None = None
        #: Jobs launched and not finished yet: the running one first, then the queued ones.
        self._jobs: list[CellJob] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The job whose turn is on the worker thread now.
        self.running_job: CellJob | None = None
        self._display = display
        self._runtime: Runtime | None = None
        self._stale = False
        self._closed = False
        settings.observe(self._settings_changed, names=list(RUNTIME_TRAITS))
        settings.observe(self._stream_delay_changed, names=["stream_delay"])

    # ------------------------------------------------------------ the runtime

    @property
    def runtime(self) -> Runtime:
        """The Runtime, built (or rebuilt after a settings change) on first use."""
        self.ensure_runtime()
        return self._runtime

    @property
    def busy(self) -> bool:
        return self.task is not None and not self.task.done()

    def ensure_runtime(self) -> str | None:
        """Build the Runtime if needed; a rebuild continues the conversation. Returns a note for the user."""
        if self._closed:
            raise RuntimeError("this chat is closed (the hermeslab extension was unloaded); load it again")
        if self._runtime is not None and not self._stale:
            return None
        config = self.settings.build_config(self.overrides)  # a bad setting fails here, before anything closes
        old, note, resume_id = self._runtime, None, None
        if old is not None and old.agent.session.turns:
            if config.store.enabled and old.writer is not None and _lab_of(old.config) == _lab_of(config):
                resume_id = old.agent.session.id
            else:
                note = "the lab database changed or is off, so this chat starts a new conversation"
        runtime = Runtime(config, source="notebook")  # if this fails, the old runtime stays in use
        if old is not None:
            old.close()  # ends the session and writes its last rows, so the new runtime can resume it
        self._runtime, self._stale = runtime, False
        runtime.bus.subscribe(self._observe)
        # Registered after the runtime's own exit hook, so it runs first (atexit is last in, first out).
        atexit.unregister(self._stop_at_exit)
        atexit.register(self._stop_at_exit)
        self._stream_delay_changed()
        if resume_id is not None:
            session_id = runtime.resume(resume_id)
            note = f"the conversation continues in session {session_id} with the new settings"
        created = runtime.lab_notice()
        if created is not None:
            note = created if note is None else f"{created}; {note}"
        self._reset_gauge()
        return note

    def _stop_at_exit(self) -> None:
        """The kernel is shutting down mid-turn: stop the turn so the log records it as interrupted."""
        job = self.running_job
        if job is not None:
            job.stop()
            job.finished.wait(EXIT_GRACE_SECONDS)

    def _settings_changed(self, _change: Any = None) -> None:
        self._stale = True

    def _stream_delay_changed(self, _change: Any = None) -> None:
        server = self._runtime.provider_handle.server if self._runtime is not None else None
        if server is not None:
            server.chunk_delay = self.settings.stream_delay

    def _observe(self, event: Event) -> None:
        self.gauge.observe_event(event)
        compactor = self._runtime.agent.compactor if self._runtime is not None else None
        if isinstance(event, CompressionEvent) and compactor is not None:
            # A context overflow may have taught the compactor a smaller window (and threshold).
            meter = self.gauge.meter
            threshold = compactor.resolution.threshold_tokens
            if (compactor.window, threshold) != (meter.context_length, meter.threshold):
                self.gauge.configure(context_length=compactor.window, threshold=threshold,
                                     overhead=meter.overhead)

    def _reset_gauge(self) -> None:
        agent = self._runtime.agent
        compactor = agent.compactor
        tools = agent.tools.schemas() or None
        self.gauge.configure(context_length=compactor.window if compactor else self._runtime.config.model.context_length,
                             threshold=compactor.resolution.threshold_tokens if compactor else None,
                             overhead=agent.counter.count_tools(tools),
                             estimate=agent.counter.count_request(agent.messages, tools))

    # ------------------------------------------------------------ jobs

    def ask(self, text: str) -> CellJob:
        """Start a turn; in a kernel it runs in the background and this returns at once."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("the message is empty: write what to ask under %%hermes")
        return self._launch(CellJob("turn", text.strip(), gauge=self.gauge, rate=self.settings.updates_per_second,
                                    display=self._display))

    def compress(self, focus: str | None = None) -> CellJob:
        """Compress the context now (``/compress``), in the background like a turn."""
        return self._launch(CellJob("compress", focus or "", gauge=self.gauge,
                                    rate=self.settings.updates_per_second, display=self._display))

    def stop(self) -> None:
        """Stop the running turn (the partial answer is kept and logged as interrupted)."""
        job = self.running_job
        if job is not None:
            job.stop()

    @property
    def pending(self) -> list[CellJob]:
        """Jobs launched and not finished yet, oldest first."""
        self._jobs = [job for job in self._jobs if not job.finished.is_set()]
        return list(self._jobs)

    def stop_all(self) -> list[CellJob]:
        """Stop the running job and keep the queued ones from starting; returns the jobs that were stopped.

        A compression in progress runs to its end (it cannot be cut short without losing it).
        """
        jobs = self.pending
        for job in jobs:
            job.stop()
        return jobs

    def interrupt_soon(self) -> None:
        """Kernel → Interrupt: called from the SIGINT handler, so it only schedules ``stop_all`` on the loop."""
        loop = self._loop
        if loop is None or loop.is_closed() or not self._jobs:
            return
        try:
            loop.call_soon_threadsafe(self.stop_all)
        except RuntimeError:  # the loop closed in between
            pass

    async def wait(self) -> Any:
        """Wait for the latest job; returns its result (a TurnResult, or a Compaction for ``compress``)."""
        if self.task is None:
            return self.last_job.result if self.last_job is not None else None
        return await asyncio.shield(self.task)

    def _launch(self, job: CellJob) -> CellJob:
        if not self.busy:
            self.ensure_runtime()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        job.background = loop is not None
        job.show()
        self.last_job = job
        self._jobs = [*self.pending, job]
        if loop is None:
            self.task = None
            self._foreground(job)
            return job
        self._loop = loop
        job.task = loop.create_task(self._run(job, self.task))
        job.task.add_done_callback(_retrieve)
        self.task = job.task
        return job

    async def _run(self, job: CellJob, previous: asyncio.Task | None) -> Any:
        try:
            if previous is not None and not previous.done():
                job.wait_for_previous()
                await asyncio.wait({previous})
        except asyncio.CancelledError:
            job.skip("cancelled before it started")
            raise
        if job.stop_requested:
            job.skip()
            return None
        try:
            self.ensure_runtime()
        except Exception as exc:
            job.fail(exc)
            raise
        future = in_daemon_thread(asyncio.get_running_loop(), self._work, job)
        cancelled = False
        while not future.done():
            try:
                await asyncio.shield(future)
            except asyncio.CancelledError:
                cancelled = True  # cancelling the task stops the turn; the thread is waited for all the same
                job.stop()
        result = future.result()
        if cancelled:
            raise asyncio.CancelledError
        return result

    def _foreground(self, job: CellJob) -> Any:
        """No event loop to return to: wait for the worker thread here; Ctrl-C stops the turn, a second one
        stops waiting (the turn then ends on its own)."""
        outcome: dict[str, Any] = {}
        done = threading.Event()  # not Thread.join: a KeyboardInterrupt inside join marks the thread as ended

        def work() -> None:
            try:
                outcome["result"] = self._work(job)
            except BaseException as exc:  # noqa: BLE001 - re-raised below on the waiting thread
                outcome["error"] = exc
            finally:
                done.set()

        threading.Thread(target=work, name="hermeslab-turn", daemon=True).start()
        try:
            done.wait()
        except KeyboardInterrupt:
            job.stop()
            done.wait()
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("result")

    def _work(self, job: CellJob) -> Any:
        self.running_job = job
        try:
            return job.run(self._runtime.agent)
        finally:
            self.running_job = None

    # ------------------------------------------------------------ commands

    def require_idle(self, command: str) -> None:
        if self.busy:
            raise ChatBusyError(f"a turn is still running in this chat; stop it (Stop, `%hermes stop`) or run "
                                f"`await hermeslab.notebook.current_chat().wait()` before `%hermes {command}`")

    def new_session(self) -> str:
        self.require_idle("new")
        session_id = self.runtime.agent.new_session()
        self._reset_gauge()
        return session_id

    def branch(self) -> str:
        self.require_idle("branch")
        session_id = self.runtime.agent.branch()
        self._reset_gauge()
        return session_id

    def resume(self, session_id: str) -> str:
        self.require_idle("resume")
        runtime = self.runtime
        if runtime.writer is not None:
            runtime.writer.flush()
        target = runtime.resume(session_id)
        self._reset_gauge()
        return target

    def configure(self, overrides: dict[str, Any]) -> str | None:
        """Rebuild the Runtime with ``overrides`` on top of the current ones; the conversation continues."""
        self.require_idle("config")
        merged = {**self.overrides, **overrides}
        self.settings.build_config(merged)  # check before anything changes
        self.overrides, self._stale = merged, True
        return self.ensure_runtime()

    def status(self) -> Status:
        runtime = self.runtime
        agent = runtime.agent
        session = agent.session
        lineage = [session.id] if session.parent_session_id is None else [session.parent_session_id, session.id]
        compactor = agent.compactor
        compressions = compactor.state.compression_count if compactor else 0
        if runtime.writer is not None and not self.busy:
            runtime.writer.flush()
            from ..store import open as open_lab

            lab = open_lab(runtime.lab_path)
            lineage = lab.lineage(session.id) or lineage
            compressions = lab.compression_count(session.id)  # a resumed session's compactor starts at 0
        meter = self.gauge.meter
        return Status(session_id=session.id, title=session.title, lineage=lineage, turns=session.turns,
                      compressions=compressions, tokens=meter.tokens,
                      context_length=meter.context_length, threshold=meter.threshold, model=runtime.config.model.name,
                      lab=runtime.lab_path if runtime.writer is not None else None, running=self.busy,
                      server_note=agent.calls.server_note)

    def close(self) -> None:
        """Stop the running turn, keep queued ones from starting, release the Runtime once all is done."""
        self._closed = True
        atexit.unregister(self._stop_at_exit)
        runtime = self._runtime
        if runtime is None:
            return
        if self.busy:
            self.stop_all()
            self.task.add_done_callback(lambda _task: runtime.close())
        else:
            runtime.close()


def _lab_of(config: Config) -> Path:
    from ..runtime import lab_path

    return lab_path(config).expanduser().absolute()


def in_daemon_thread(loop: asyncio.AbstractEventLoop, function: Callable[..., Any], *args: Any) -> asyncio.Future:
    """Run ``function`` on a new daemon thread; the returned future settles on ``loop``.

    Not the loop's default executor: its threads are joined at interpreter exit, so a
    kernel restarted mid-turn would hang until the turn ended. A daemon thread dies
    with the process and loses only the turn in flight.
    """
    future = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (function(*args), None)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task, which re-raises it
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop closed while we worked: nobody is waiting any more
            pass

    threading.Thread(target=work, name="hermeslab-turn", daemon=True).start()
    return future


def _retrieve(task: asyncio.Task) -> None:
    """Mark a failed job's exception as seen: the transcript already shows it, awaiting still raises it."""
    if not task.cancelled():
        task.exception()
