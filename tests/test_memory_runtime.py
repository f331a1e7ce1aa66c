"""Wiring: where the memory files live, which tools the runtime registers, and the config keys."""

import pytest

from hermeslab.core.config import Config, ConfigError
from hermeslab.memory.recall import LabRecall
from hermeslab.runtime import Runtime, build_memory, memory_folder


def config_for(tmp_path, **overrides):
    return Config().with_overrides({"store.path": str(tmp_path / "lab" / "lab.duckdb"),
                                    "tools.workspace": str(tmp_path), "agent.stream": False, **overrides})


def test_memory_lives_beside_the_lab_and_its_tools_join_the_builtins(tmp_path):
    with Runtime(config_for(tmp_path)) as runtime:
        assert runtime.memory.files.folder == tmp_path / "lab"
        assert runtime.memory.skills.folder == tmp_path / "lab" / "skills"
        names = runtime.tools.names()
        assert {"memory", "skills_list", "skill_view", "skill_manage", "todo", "read_file"} <= set(names)
        assert runtime.agent.memory is runtime.memory and runtime.memory.provider is None
        assert runtime.agent.compactor.pre_compress is None
        runtime.agent.chat("remember that the lab folder holds the memory files")
    assert (tmp_path / "lab" / "MEMORY.md").read_text() == "the lab folder holds the memory files\n"


def test_folders_can_be_configured_and_everything_switched_off(tmp_path):
    config = config_for(tmp_path, **{"memory.path": str(tmp_path / "notes"), "skills.path": str(tmp_path / "sk")})
    memory = build_memory(config)
    assert memory_folder(config) == tmp_path / "notes" == memory.files.folder
    assert memory.skills.folder == tmp_path / "sk"
    off = config_for(tmp_path, **{"memory.memory_enabled": False, "memory.user_profile_enabled": False,
                                  "skills.enabled": False})
    assert build_memory(off) is None
    with Runtime(off) as runtime:
        assert runtime.memory is None and "memory" not in runtime.tools.names()
    skills_only = build_memory(config_for(tmp_path, **{"memory.memory_enabled": False,
                                                       "memory.user_profile_enabled": False}))
    assert [tool.name for tool in skills_only.tools()] == ["skills_list", "skill_view", "skill_manage"]


def test_the_lab_provider_is_wired_into_the_loop_and_the_compactor(tmp_path):
    with Runtime(config_for(tmp_path, **{"memory.provider": "lab"})) as runtime:
        assert isinstance(runtime.memory.provider, LabRecall)
        assert runtime.memory.provider.lab_path == tmp_path / "lab" / "lab.duckdb"
        assert runtime.agent.compactor.pre_compress == runtime.memory.pre_compress


@pytest.mark.parametrize("key,value,message", [
    ("memory.provider", "honcho", "memory.provider: unknown provider 'honcho'"),
    ("memory.nudge_interval", -1, "memory.nudge_interval: must be 0 (off) or positive"),
    ("memory.memory_char_limit", 0, "memory.memory_char_limit: must be positive"),
    ("memory.prefetch_timeout", 0, "memory.prefetch_timeout: must be positive"),
    ("skills.creation_nudge_interval", -2, "skills.creation_nudge_interval: must be 0 (off) or positive"),
    ("skills.max_chars", 0, "skills.max_chars: must be positive"),
])
def test_bad_memory_settings_name_the_key(key, value, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Config().with_overrides({key: value})


def test_hermes_key_names_load_from_yaml(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("memory:\n  nudge_interval: 4\n  provider: lab\nskills:\n  creation_nudge_interval: 7\n")
    config = Config.from_yaml(path)
    memory, skills = config.memory, config.skills
    assert (memory.nudge_interval, memory.provider, skills.creation_nudge_interval) == (4, "lab", 7)
