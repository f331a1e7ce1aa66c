"""A server's pace from llama-server's ``timings``, the timeout a request gets from it, and ``/props``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hermeslab.providers.pace import HEADROOM, MIN_TOKENS, Pace
from hermeslab.providers.server_props import props_from


def test_no_reading_keeps_the_configured_timeout():
    assert Pace().timeout(120.0, 5_000, 4_000) == 120.0


def test_a_slow_server_gets_the_time_its_output_cap_needs():
    pace = Pace()
    pace.observe({"prompt_n": 1_000, "prompt_per_second": 500.0, "predicted_n": 200, "predicted_per_second": 30.0})
    # 4,000 tokens at 30 a second plus 2,000 prompt tokens at 500 a second, with headroom.
    assert pace.timeout(120.0, 2_000, 4_000) == HEADROOM * (2_000 / 500 + 4_000 / 30)
    assert pace.timeout(120.0, 100, 64) == 120.0  # a short request keeps the configured timeout


def test_tiny_or_malformed_readings_are_ignored():
    pace = Pace()
    for timings in (None, "fast", {"predicted_n": MIN_TOKENS - 1, "predicted_per_second": 1.0},
                    {"predicted_n": 50, "predicted_per_second": 0}, {"predicted_n": True, "predicted_per_second": 9.0}):
        pace.observe(timings)
    assert pace.generated_per_second is None and pace.prompt_per_second is None


@given(st.lists(st.floats(min_value=0.5, max_value=5_000), min_size=1, max_size=20),
       st.integers(1, 100_000), st.integers(1, 100_000))
def test_the_running_pace_stays_within_its_readings_and_never_shortens_the_timeout(speeds, prompt, cap):
    pace = Pace()
    for speed in speeds:
        pace.observe({"predicted_n": 100, "predicted_per_second": speed})
    assert min(speeds) - 1e-6 <= pace.generated_per_second <= max(speeds) + 1e-6
    assert pace.timeout(60.0, prompt, cap) >= 60.0


def test_props_are_read_from_llama_servers_body():
    props = props_from({"total_slots": 1, "chat_template_caps": {"supports_tools": False},
                        "default_generation_settings": {"n_ctx": 4096}, "build_info": "b1-abc",
                        "model_path": "/m/smol.gguf"})
    assert (props.slots, props.supports_tools, props.context_length, props.build, props.model_path) == (
        1, False, 4096, "b1-abc", "/m/smol.gguf")
    assert props_from([1, 2]) is None
    odd = props_from({"total_slots": "one", "chat_template_caps": {"supports_tools": "no"}})
    assert odd.slots is None and odd.supports_tools is None
