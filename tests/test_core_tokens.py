from hermeslab.core.tokens import (
    TokenCounter,
    UsageCalibration,
    count_text,
    rough_reply_tokens,
    rough_tokens,
    rough_tool_schema_tokens,
)


def test_count_text_uses_cl100k():
    assert count_text("hello world") == 2
    assert count_text("") == 0


def test_message_counts_are_cached_by_content():
    counter = TokenCounter()
    message = {"role": "user", "content": "The quick brown fox jumps over the lazy dog."}
    first = counter.count_message(message)
    assert counter.count_message(dict(message)) == first
    assert len(counter._cache) == 1
    assert counter.count_message({"role": "user", "content": "different"}) != first


def test_tool_calls_and_images_are_counted():
    counter = TokenCounter()
    plain = counter.count_message({"role": "assistant", "content": ""})
    with_call = counter.count_message({"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}]})
    assert with_call > plain + 5
    image = counter.count_message({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]})
    assert image >= 765


def test_rough_tool_schemas_count_names_descriptions_and_compact_parameters():
    tools = [{"type": "function", "function": {"name": "read_file", "description": "x" * 400, "parameters": {}}}]
    assert rough_tool_schema_tokens(tools) == rough_tokens("read_file" + "x" * 400 + "{}")
    assert rough_tool_schema_tokens(None) == 0


def test_a_rough_reply_costs_its_text_and_its_calls_over_four():
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    reply = {"role": "assistant", "content": "y" * 400, "tool_calls": [call]}
    assert rough_reply_tokens(reply) == rough_tokens("y" * 400 + "read_file" + '{"path": "a"}')


def test_calibration_learns_the_ratio():
    calibration = UsageCalibration(smoothing=0.5)
    assert calibration.apply(1000) == 1000
    calibration.observe(1000, 1100)
    assert calibration.apply(1000) == 1100
    calibration.observe(1000, 1300)
    assert calibration.apply(1000) == 1200
    calibration.observe(0, 50)  # ignored
    assert calibration.samples == 2


def test_running_count_counts_only_new_messages_and_notices_rewrites():
    from hermeslab.core.tokens import RunningCount

    counter = TokenCounter()
    running = RunningCount(counter)
    history = [{"role": "user", "content": f"message {i}"} for i in range(5)]
    full = sum(counter.count_message(m) for m in history)
    assert running.total(history) == full
    history.append({"role": "assistant", "content": "reply"})
    assert running.total(history) == full + counter.count_message(history[-1])
    rewritten = [history[0], {"role": "user", "content": "summary"}]
    assert running.total(rewritten) == sum(counter.count_message(m) for m in rewritten)
    assert running.total([]) == 0


def test_a_message_edited_in_place_is_counted_again():
    counter = TokenCounter()
    message = {"role": "user", "content": "short"}
    before = counter.count_message(message)
    message["content"] = "a much longer text than before, with many more tokens in it"
    assert counter.count_message(message) > before
    message["tool_calls"] = [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    assert counter.count_message(message) > before + 5
