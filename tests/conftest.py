"""Every test sees hermeslab's own wording unless it asks for Hermes's.

Under the ``hermes-0.19`` preset hermeslab writes Hermes 0.19.0's texts when
hermes-agent is installed on the machine (``hermeslab.context.hermes_texts``);
tests must not depend on what a machine has installed, so the switch is off
here, and the tests of that path turn it on themselves.
"""

import pytest

from hermeslab.context.hermes_texts import SWITCH_ENV_VAR, installed_texts


@pytest.fixture(autouse=True)
def _hermeslab_wording(monkeypatch):
    monkeypatch.setenv(SWITCH_ENV_VAR, "off")
    installed_texts.cache_clear()
    yield
    installed_texts.cache_clear()
