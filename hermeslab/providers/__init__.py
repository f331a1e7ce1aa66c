"""Model backends behind one protocol, and the choice of which one a Config gets.

Without an endpoint configured, hermeslab starts a local OpenAI-compatible
server hosting the offline model and talks to it through the ``openai`` SDK,
so the default setup exercises the same client path as a hosted model.
"""

from __future__ import annotations

from ..core.config import Config
from .base import ChatRequest, ChatResponse, Provider, ProviderError, StreamDelta, Usage
from .offline import MODEL_NAME as OFFLINE_MODEL_NAME
from .offline import OfflineModel
from .openai_compat import OpenAICompatProvider
from .server import CompletionEndpoint, LocalServer, Reply

__all__ = [
    "ChatRequest",
    "ChatResponse",
    "CompletionEndpoint",
    "LocalServer",
    "OFFLINE_MODEL_NAME",
    "OfflineModel",
    "OpenAICompatProvider",
    "Provider",
    "ProviderError",
    "ProviderHandle",
    "Reply",
    "StreamDelta",
    "Usage",
    "open_provider",
]


class ProviderHandle:
    """A provider plus the local server it may depend on; closing it releases both."""

    def __init__(self, provider: Provider, server: LocalServer | None = None):
        self.provider = provider
        self.server = server

    def close(self) -> None:
        """Close the client's connections, then stop the server; safe to call twice."""
        try:
            close = getattr(self.provider, "close", None)
            if close is not None:
                close()
        finally:
            if self.server is not None:
                self.server.stop()

    def __enter__(self) -> "ProviderHandle":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_provider(config: Config) -> ProviderHandle:
    """The configured endpoint, or the offline model behind a local server on a free loopback port.

    The offline model gets the configured window as its own, as a hosted model has one.
    """
    model = config.model
    if model.base_url or model.api_key:
        return ProviderHandle(OpenAICompatProvider(model.base_url, model.api_key, model.name, timeout=model.timeout))
    server = LocalServer(OfflineModel(context_length=model.context_length))
    base_url = server.start()
    try:
        provider = OpenAICompatProvider(base_url, None, OFFLINE_MODEL_NAME, timeout=model.timeout,
                                        name=OFFLINE_MODEL_NAME)
    except BaseException:
        server.stop()
        raise
    return ProviderHandle(provider, server)
