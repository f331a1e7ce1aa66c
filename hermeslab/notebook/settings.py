"""The notebook chat's settings, as a traitlets Configurable named ``Hermes``.

Set them with ``%config Hermes.model = "gpt-4.1-mini"`` in a notebook or
``c.Hermes.lab = "runs/lab.duckdb"`` in ``ipython_config.py``. A setting left at
None keeps what the YAML file (or hermeslab's defaults: the offline model) says.
"""

from __future__ import annotations

from typing import Any

from traitlets import Bool, Float, Integer, TraitError, Unicode, validate
from traitlets.config import Configurable

from ..core.config import Config

#: Settings that change what the Runtime is built from; the rest apply as they are.
RUNTIME_TRAITS = ("config_file", "model", "base_url", "api_key", "context_length", "lab", "workspace", "terminal")


class Hermes(Configurable):
    """Settings for ``%%hermes``; a change to a runtime setting takes effect before the next turn."""

    config_file = Unicode(None, allow_none=True,
                          help="The config the chat starts from: a YAML file (Hermes key names), a preset name "
                               "or BASE,key=value,...").tag(config=True)
    model = Unicode(None, allow_none=True,
                    help="Model name (model.name); None keeps the config's, the offline model by default.").tag(
        config=True)
    base_url = Unicode(None, allow_none=True,
                       help="OpenAI-compatible endpoint (model.base_url); None starts the offline model.").tag(
        config=True)
    api_key = Unicode(None, allow_none=True, help="API key for base_url (model.api_key).").tag(config=True)
    context_length = Integer(None, allow_none=True,
                             help="Context window in tokens (model.context_length).").tag(config=True)
    lab = Unicode(None, allow_none=True,
                  help="The lab database (store.path); None: $HERMESLAB_HOME/lab.duckdb, "
                       "else .hermeslab/lab.duckdb in the current folder.").tag(config=True)
    workspace = Unicode(None, allow_none=True,
                        help="Folder the file tools are confined to (tools.workspace).").tag(config=True)
    terminal = Bool(None, allow_none=True,
                    help="Offer the terminal tool (tools.terminal.enabled).").tag(config=True)
    stream_delay = Float(0.0, help="Seconds the offline model pauses between streamed chunks "
                                   "(to watch streaming, or to test the Stop button).").tag(config=True)
    updates_per_second = Float(10.0, help="Most transcript and gauge refreshes per second while a turn "
                                          "streams; the final state is always shown.").tag(config=True)

    @validate("stream_delay")
    def _check_stream_delay(self, proposal: Any) -> float:
        if proposal["value"] < 0:
            raise TraitError(f"Hermes.stream_delay must be zero or positive seconds, got {proposal['value']}")
        return proposal["value"]

    @validate("updates_per_second")
    def _check_rate(self, proposal: Any) -> float:
        if not proposal["value"] > 0:
            raise TraitError(f"Hermes.updates_per_second must be positive, got {proposal['value']}")
        return proposal["value"]

    @validate("context_length")
    def _check_context_length(self, proposal: Any) -> int | None:
        if proposal["value"] is not None and proposal["value"] <= 0:
            raise TraitError(f"Hermes.context_length must be a positive number of tokens, got {proposal['value']}")
        return proposal["value"]

    def overrides(self) -> dict[str, Any]:
        """The settings that were given, as dotted config keys."""
        keys = {"model": "model.name", "base_url": "model.base_url", "api_key": "model.api_key",
                "context_length": "model.context_length", "lab": "store.path", "workspace": "tools.workspace",
                "terminal": "tools.terminal.enabled"}
        return {dotted: getattr(self, name) for name, dotted in keys.items() if getattr(self, name) is not None}

    def build_config(self, extra: dict[str, Any] | None = None) -> Config:
        """The YAML file (presets applied), then these settings, then ``%hermes config`` overrides."""
        from ..policies.loading import load_config

        return load_config(self.config_file or None, {**self.overrides(), **(extra or {})})
