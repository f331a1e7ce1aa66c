"""The classifier against Hermes 0.19.0's own, on the same failures, run inside the reference venv.

Every spec in ``provider_failures.CASES`` goes to Hermes's
``classify_api_error`` as the SDK error (or plain exception) Hermes would
meet, with the same session size. Its reason must be hermeslab's class under
Hermes's name for it, except for the specs that say where and why hermeslab
decides otherwise; for those, Hermes must still decide as they say, so a
changed Hermes shows up here.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from provider_failures import CASES
from shared_data import hermes_venv

from hermeslab.reference.venv import venv_python

pytestmark = pytest.mark.slow

#: Runs in Hermes's venv: reads specs as JSON lines on stdin, prints {id: reason}.
WORKER = r'''
import builtins, json, sys
from agent.error_classifier import classify_api_error

class SDKError(Exception):
    def __init__(self, message, status_code, body):
        super().__init__(message)
        self.status_code, self.body = status_code, body

def exception_named(name, message):
    kind = getattr(builtins, name, None)
    if not (isinstance(kind, type) and issubclass(kind, BaseException)):
        kind = type(name, (Exception,), {})
    return kind(message)

def build(spec):
    status, body = spec["status"], spec["body"]
    if status is not None and body is not None:
        detail = body.get("error", body)
        text = detail.get("message") if isinstance(detail, dict) else None
        return SDKError(f"Error code: {status}" + (f" - {text}" if text else ""), status, detail)
    if status is not None:
        return SDKError(spec["message"], status, {})
    return exception_named(spec["type_name"], spec["message"])

reasons = {}
for spec in json.load(sys.stdin):
    size = spec["size"]
    options = {"approx_tokens": size[0], "num_messages": size[1], "context_length": size[2]} if size else {}
    reasons[spec["id"]] = classify_api_error(build(spec), **options).reason.value
print(json.dumps(reasons))
'''


@pytest.fixture(scope="module")
def hermes_reasons() -> dict[str, str]:
    process = subprocess.run([str(venv_python(hermes_venv())), "-c", WORKER], capture_output=True, text=True,
                             input=json.dumps([spec.as_json() for spec in CASES]), timeout=120, check=False)
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("spec", CASES, ids=[spec.id for spec in CASES])
def test_hermes_decides_each_failure_as_hermeslab_does_or_as_the_spec_says(hermes_reasons, spec):
    assert hermes_reasons[spec.id] == spec.hermes_reason


def test_every_deliberate_difference_says_why():
    assert all(spec.why for spec in CASES if spec.hermes)
