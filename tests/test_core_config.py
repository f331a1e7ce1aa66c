import pytest

from hermeslab.core.config import Config, ConfigError


def test_yaml_with_hermes_key_names(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "model:\n  default: my-model\n  context_length: 32000\n"
        "compression:\n  threshold: 0.6\n  target_ratio: 0.3\n"
        "agent:\n  max_turns: 12\n"
    )
    config = Config.from_yaml(path)
    assert config.model.name == "my-model"
    assert config.model.context_length == 32000
    assert config.compression.threshold == 0.6
    assert config.agent.max_iterations == 12


@pytest.mark.parametrize(
    "data, message",
    [
        ({"compression": {"treshold": 0.5}}, "unknown config key 'compression.treshold'"),
        ({"model": {"context_length": "big"}}, "model.context_length: expected an integer, got 'big'"),
        ({"compression": {"enabled": "maybe"}}, "compression.enabled: expected true or false"),
        ({"model": 3}, "model: expected a mapping, got int"),
    ],
)
def test_bad_config_names_the_key(data, message):
    with pytest.raises(ConfigError, match=message):
        Config.from_dict(data)


def test_overrides_and_digest():
    base = Config()
    changed = base.with_overrides({"compression.threshold": 0.6, "tools.terminal.enabled": True})
    assert changed.compression.threshold == 0.6 and changed.tools.terminal.enabled
    assert base.compression.threshold == 0.5
    assert changed.digest() != base.digest()
    assert base.with_overrides({"model.api_key": "secret"}).digest() == base.digest()
    with pytest.raises(ConfigError, match="unknown config key 'compression.nope'"):
        base.with_overrides({"compression.nope": 1})


def test_invalid_yaml_is_reported(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        Config.from_yaml(path)


@pytest.mark.parametrize("text, where", [
    ("model:\n  name: x\n  context_length: [1, 2\ncompression:\n  threshold: 0.5\n",
     "line 4, column 12: expected ',' or ']', but got ':' (while parsing a flow sequence that starts at line 3, "
     "column 19)"),
    ("model: name: x\n", "line 1, column 12: mapping values are not allowed here"),
    ("model:\n\t- x\n", "line 2, column 1: found character '\\t' that cannot start any token"),
])
def test_invalid_yaml_is_one_line_with_file_line_column_and_problem(tmp_path, text, where):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        Config.from_yaml(path)
    assert str(error.value) == f"{path}: not valid YAML: {where}"
