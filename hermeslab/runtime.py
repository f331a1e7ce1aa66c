"""Wiring: build a ready agent from a Config (provider, tools, bus, DuckDB writer).

The agent loop stays free of I/O choices; this is the one place that decides
which provider to start, where the lab database lives and what subscribes to
the event bus.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core.config import Config
from .home import HOME_ENV_VAR, default_lab_path

# The agent stack (DuckDB, pandas, the openai SDK, ...) is imported by the functions that use it, so that
# importing this module costs nothing until a runtime is built.
if TYPE_CHECKING:
    from .context.budget import Resolution
    from .context.types import Summariser
    from .core.events import EventBus
    from .memory.manager import Memory
    from .providers import ProviderHandle
    from .recovery import ProviderSlot
    from .search.labsync import LabSearch
    from .session import Session
    from .store import StoreWriter
    from .tools.mcp.manager import MCPManager


def lab_path(config: Config) -> Path:
    """``store.path``, else the default lab (``$HERMESLAB_HOME``, else ``./.hermeslab``; see ``hermeslab.home``)."""
    return Path(config.store.path).expanduser() if config.store.path else default_lab_path()


class Runtime:
    """Everything one conversation needs. Use as a context manager, or call ``close()``."""

    def __init__(self, config: Config | None = None, *, source: str = "cli", bus: EventBus | None = None,
                 session: Session | None = None):
        from .agent import Agent
        from .policies.running import make_compactor
        from .core.events import EventBus
        from .providers import open_provider
        from .search.labsync import LabSearch
        from .store import StoreWriter
        from .tools import builtin_registry
        from .tools.session_search import session_search_tool
        from .tools.todo import TodoStore

        self.config = config or Config()
        self.bus = bus or EventBus()
        self.writer: StoreWriter | None = None
        #: Whether this runtime created the lab file (so the caller can say where it went).
        self.lab_created = False
        # The provider first: a runtime that cannot reach its model (or import its client) must not leave
        # an empty lab behind, or the next run would never say where its lab was created.
        self.provider_handle: ProviderHandle = open_provider(self.config)
        if self.config.store.enabled:
            try:
                self.lab_created = create_lab(lab_path(self.config))
                self.writer = StoreWriter(lab_path(self.config), redact=_redactor(self.config))
                self.writer.attach(self.bus)
            except BaseException:
                self.provider_handle.close()
                raise
        self.todos = TodoStore()
        self.tools = builtin_registry(self.config.tools, todo_store=self.todos)
        #: Memory files, skills, background review and memory provider (None when all are switched off).
        self.memory = build_memory(self.config)
        for tool in self.memory.tools() if self.memory is not None else ():
            self.tools.register(tool)
        compactor = None
        if self.config.compression.enabled:
            hook = self.memory.pre_compress if self.memory is not None and self.memory.provider is not None else None
            compactor = make_compactor(self.config, make_summariser(self.config, self.provider_handle.provider),
                                       todos=self.todos.format_for_injection, pre_compress=hook)
        self.fallbacks = fallback_slots(self.config)
        self.agent = Agent(self.provider_handle.provider, config=self.config, tools=self.tools, bus=self.bus,
                           session=session, source=source, compactor=compactor, fallbacks=self.fallbacks,
                           memory=self.memory)
        #: Search over every session in the lab (None without a lab); each commit is indexed as it lands.
        self.search: LabSearch | None = None
        if self.writer is not None:
            self.search = LabSearch(self.writer.path)
            self.writer.on_commit(self.search.record)
            self.tools.register(session_search_tool(self.search, lambda: self.agent.session.id))
        #: The connected MCP servers (None without ``mcp_servers``); their tools are in ``self.tools``.
        self.mcp: MCPManager | None = None
        if self.config.mcp_servers:
            from .tools.mcp.manager import MCPManager

            self.mcp = MCPManager(self.config.mcp_servers, bus=self.bus, session_id=lambda: self.agent.session.id)
            self.mcp.start(self.tools)

    @property
    def lab_path(self) -> Path:
        return lab_path(self.config)

    @property
    def resolution(self) -> "Resolution | None":
        """The compactor's effective threshold, budgets and reserve with their rules (None: compression is off)."""
        return self.agent.compactor.resolution if self.agent.compactor is not None else None

    def lab_notice(self) -> str | None:
        """``lab created at PATH`` (and where memory files go) if this runtime created the lab, else None.

        Said once, when the file is new: a lab that lands in the current folder
        by default is easy to lose track of.
        """
        if not self.lab_created:
            return None
        notice = f"lab created at {self.lab_path}"
        if self.memory is not None:
            notice += f"; memory files in {memory_folder(self.config)}"
        if not self.config.store.path and not os.environ.get(HOME_ENV_VAR, "").strip():
            notice += f" (set {HOME_ENV_VAR} to keep labs in one folder)"
        return notice

    def resume(self, session_id: str) -> str:
        """Continue a logged session (following compression rotations to the newest one)."""
        from .store import open as open_lab

        lab = open_lab(self.lab_path)
        target = lab.continuation(session_id)
        history = lab.history(target)
        if not history:
            raise ValueError(f"no session {session_id!r} with messages in {self.lab_path}")
        stats = lab.sql("SELECT max(seq) AS seq, max(turn) AS turn FROM messages WHERE session_id = ?", [target])
        self.agent.resume(target, history, next_seq=int(stats["seq"].iloc[0]) + 1,
                          turns=int(stats["turn"].iloc[0] or 0))
        return target

    def close(self) -> None:
        """End the session, write everything queued, stop the MCP servers and the local server."""
        try:
            if self.memory is not None:
                self.memory.close()  # a running background review still needs the provider
            self.agent.close()
        finally:
            try:
                if self.writer is not None:
                    self.writer.close()
                if self.search is not None:
                    self.search.close()
            finally:
                try:
                    if self.mcp is not None:
                        self.mcp.close()
                finally:
                    self.provider_handle.close()
                    for slot in self.fallbacks:
                        slot.provider.close()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def create_lab(path: Path) -> bool:
    """Create an empty lab at ``path`` unless a file is there; True when this call made it.

    The writer would create it only with its first rows; made up front, the
    lab is where the runtime says it is from the start.
    """
    from .store.schema import ensure_schema, open_lab_file

    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_lab_file(path, read_only=False, timeout=30.0) as con:
        ensure_schema(con)
    return True


def memory_folder(config: Config) -> Path:
    """Where MEMORY.md and USER.md live: ``memory.path``, or beside the lab database."""
    return Path(config.memory.path) if config.memory.path else lab_path(config).parent


def build_memory(config: Config) -> Memory | None:
    """Memory for the configured folders and provider; None when memory files and skills are all off."""
    from .agent import Agent
    from .memory.manager import Memory
    from .memory.recall import LabRecall

    memory = config.memory
    if not (memory.memory_enabled or memory.user_profile_enabled or config.skills.enabled):
        return None
    provider = LabRecall(lab_path(config)) if memory.provider == "lab" else None
    return Memory(config, memory_folder(config), skills_folder=config.skills.path, provider=provider, make_agent=Agent)


def fallback_slots(config: Config) -> list[ProviderSlot]:
    """Clients for ``recovery.fallback_providers``, in order, for the agent's recovery chain."""
    from .providers import OpenAICompatProvider
    from .recovery import ProviderSlot

    return [ProviderSlot(OpenAICompatProvider(entry["base_url"], entry["api_key"], entry["model"],
                                              timeout=config.model.timeout, name=f"fallback-{index + 1}"),
                         entry["model"])
            for index, entry in enumerate(config.recovery.fallback_providers)]


def make_summariser(config: Config, provider: Any) -> Summariser:
    """The LLM summariser with the extractive one as its failure fallback, or the extractive one alone."""
    from .context.extractive import ExtractiveSummariser
    from .context.summary import LLMSummariser

    extractive = ExtractiveSummariser()
    if config.compression.summariser == "extractive":
        return extractive
    return LLMSummariser(provider, config.model.name, summary_model=config.compression.summary_model,
                         fallback=extractive)


def _redactor(config: Config):
    """Secrets never reach the log when redaction is on (the default)."""
    if not config.compression.redact:
        return None
    from .context.redact import redact

    return redact
