"""Model backends, and the choice of which one a Config gets.

Without an endpoint configured, hermeslab starts a local OpenAI-compatible
server hosting the offline model and talks to it through the ``openai`` SDK,
so the default setup exercises the same client path as a hosted model.

The provider contract (ChatRequest, Provider, ...) lives in
``hermeslab.core.provider``. The backends below are imported on first use
(PEP 562): the ``openai`` SDK and the HTTP server cost a command that needs
neither, such as ``hermeslab --help``, most of its start-up time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.config import Config
    from ..core.provider import Provider
    from .offline import MODEL_NAME as OFFLINE_MODEL_NAME
    from .offline import OfflineModel
    from .openai_compat import OpenAICompatProvider
    from .server import CompletionEndpoint, LocalServer, Reply

__all__ = ["CompletionEndpoint", "LocalServer", "OFFLINE_MODEL_NAME", "OfflineModel", "OpenAICompatProvider",
           "ProviderHandle", "Reply", "open_provider"]


def __getattr__(name: str) -> Any:
    """Import a backend when it is first asked for, and keep it as a module attribute from then on."""
    if name in ("CompletionEndpoint", "LocalServer", "Reply"):
        from . import server as source
    elif name == "OpenAICompatProvider":
        from . import openai_compat as source
    elif name in ("OfflineModel", "OFFLINE_MODEL_NAME"):
        from . import offline as source
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = source.MODEL_NAME if name == "OFFLINE_MODEL_NAME" else getattr(source, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _backend(name: str) -> Any:
    """A backend as this module holds it now, so that one a test put in its place is the one used."""
    return globals()[name] if name in globals() else __getattr__(name)


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
    client = _backend("OpenAICompatProvider")
    if model.base_url or model.api_key:
        return ProviderHandle(client(model.base_url, model.api_key, model.name, timeout=model.timeout))
    offline_name = _backend("OFFLINE_MODEL_NAME")
    server = _backend("LocalServer")(_backend("OfflineModel")(context_length=model.context_length))
    base_url = server.start()
    try:
        provider = client(base_url, None, offline_name, timeout=model.timeout, name=offline_name)
    except BaseException:
        server.stop()
        raise
    return ProviderHandle(provider, server)
