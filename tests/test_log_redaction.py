"""Secrets typed into a chat or read from a file never reach the lab database."""

import json

from hermeslab.core.config import Config
from hermeslab.runtime import Runtime
from hermeslab.store import open as open_lab

OPENAI_KEY = "sk-proj-" + "Zq8r3LmN5vT1xW7yB2cD4eF6gH9jK0pA"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
DB_URL_PASSWORD = "s3cr3t-Passw0rd-42"


def test_planted_secrets_are_redacted_in_every_table(tmp_path):
    (tmp_path / ".env").write_text(f"GITHUB_TOKEN={GITHUB_TOKEN}\nDATABASE_URL=postgres://app:{DB_URL_PASSWORD}@db:5432/app\n")
    config = Config().with_overrides({"store.path": str(tmp_path / "lab.duckdb"), "tools.workspace": str(tmp_path)})
    with Runtime(config) as runtime:
        runtime.agent.chat(f"remember that my key is {OPENAI_KEY}")
        runtime.agent.chat("read .env")
        # the model saw the real text: redaction applies to the log, not to the conversation
        assert any(GITHUB_TOKEN in (m.get("content") or "") for m in runtime.agent.messages)
    lab = open_lab(tmp_path / "lab.duckdb")
    dump = json.dumps({table: lab.sql(f"SELECT * FROM {table}").astype(str).to_dict("records")
                       for table in ("sessions", "messages", "turns", "tool_calls", "events", "errors")})
    for secret in (OPENAI_KEY.removeprefix("sk-proj-"), GITHUB_TOKEN.removeprefix("ghp_"), DB_URL_PASSWORD):
        fragments = {secret[i:i + 8] for i in range(len(secret) - 7)}
        assert not [f for f in fragments if f in dump], "a reusable piece of a secret reached the log"
    assert "[REDACTED:" in dump
    assert "read .env" in dump and "remember that my key is" in dump  # the rows themselves are there
