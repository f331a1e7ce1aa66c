"""hermeslab.plot_token_usage: prompt tokens per call with the threshold, compressions and session boundaries."""

import pytest

import hermeslab
from hermeslab.core.config import Config
from hermeslab.runtime import Runtime
from hermeslab.plots import token_usage_frame, turn_spans
from hermeslab.store import open as open_lab


@pytest.fixture(scope="module")
def compressed_chat(tmp_path_factory):
    """A logged conversation that was compressed once (rotating into a child session), then went on."""
    root = tmp_path_factory.mktemp("plot")
    (root / "notes.txt").write_text("the deploy window is Tuesday\n")
    config = Config().with_overrides({"store.path": str(root / "lab.duckdb"), "tools.workspace": str(root),
                                      "model.context_length": 8000})
    runtime = Runtime(config, source="notebook")
    for text in ["read notes.txt", "tell me a long story", "list files", "add todos: ship it"]:
        runtime.agent.chat(text)
    first = runtime.agent.session.id
    assert runtime.agent.compress().changed
    runtime.agent.chat("show my todos")
    runtime.writer.flush()
    yield runtime, first, root / "lab.duckdb"
    runtime.close()


def legend(fig) -> list[str]:
    return [text.get_text() for text in fig.axes[0].get_legend().get_texts()]


def test_plot_of_a_live_runtime_marks_threshold_compression_and_the_new_session(compressed_chat):
    runtime = compressed_chat[0]
    fig = hermeslab.plot_token_usage(runtime)
    labels = legend(fig)
    threshold = runtime.agent.compactor.budgets.threshold_tokens
    assert f"compression threshold ({threshold:,})" in labels
    assert "compression" in labels and "new session" in labels and "context window (8,000)" in labels
    ax = fig.axes[0]
    prompt_line = next(line for line in ax.get_lines() if line.get_label() == "prompt tokens")
    calls = open_lab(runtime.lab_path).api_calls()
    assert len(prompt_line.get_xdata()) == (calls["purpose"].fillna("turn") == "turn").sum()  # no summary calls
    boundaries = [line.get_xdata()[0] for line in ax.get_lines() if line.get_label() == "new session"]
    assert len(boundaries) == 1 and boundaries[0] % 1 == 0.5
    assert runtime.agent.session.id in ax.get_title()


def test_the_plot_shows_as_a_picture_in_a_notebook_without_the_matplotlib_magic(compressed_chat):
    from IPython.core.formatters import DisplayFormatter

    shown, _ = DisplayFormatter().format(hermeslab.plot_token_usage(compressed_chat[0]))
    assert shown["image/png"].startswith(b"\x89PNG")


def test_a_session_id_plots_its_lineage_and_reads_the_threshold_from_the_log(compressed_chat):
    runtime, first, lab_path = compressed_chat
    threshold = runtime.agent.compactor.budgets.threshold_tokens
    fig = hermeslab.plot_token_usage(runtime.agent.session.id, lab=lab_path)
    assert f"compression threshold ({threshold:,})" in legend(fig) and "new session" in legend(fig)
    only_first = hermeslab.plot_token_usage([first], lab=lab_path)
    assert "new session" not in legend(only_first)
    assert "compression" in legend(only_first)


def test_bad_input_gets_a_clear_error(compressed_chat, tmp_path):
    _, _, lab_path = compressed_chat
    with pytest.raises(ValueError, match="no session 'nope'"):
        hermeslab.plot_token_usage("nope", lab=lab_path)
    with pytest.raises(TypeError, match="session id, a list of session ids"):
        hermeslab.plot_token_usage(42, lab=lab_path)
    with pytest.raises(ValueError, match="holds no sessions"):
        hermeslab.plot_token_usage(open_lab(tmp_path / "empty.duckdb"))



def test_the_legend_sits_beside_the_data_and_the_top_axis_numbers_the_turns(compressed_chat):
    runtime, _, lab_path = compressed_chat
    fig = hermeslab.plot_token_usage(runtime.agent.session.id, lab=lab_path)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    calls = token_usage_frame(open_lab(lab_path), open_lab(lab_path).lineage(runtime.agent.session.id))
    turns = [turn for turn, _, _ in turn_spans(calls)]
    assert turns == sorted(set(calls["turn"])) == [1, 2, 3, 4, 5]
    top = next(child for child in ax.child_axes if "turn" in child.get_xlabel())
    assert [label.get_text() for label in top.get_xticklabels()] == [str(turn) for turn in turns]
    shaded = [patch for patch in ax.patches if patch.get_facecolor()[:3] == pytest.approx((0.92,) * 3)]
    assert len(shaded) == len(turns) // 2


def test_a_turn_split_by_a_compression_is_one_span_and_many_turns_are_thinned():
    import pandas as pd
    from matplotlib.figure import Figure

    from hermeslab.plots import _mark_turns

    usage = pd.DataFrame({"call": range(1, 8), "turn": [1, 1, 2, 2, 2, 3, 3],
                          "session_id": ["a", "a", "a", "b", "b", "b", "b"]})
    assert turn_spans(usage) == [(1, 1, 2), (2, 3, 5), (3, 6, 7)]
    many = pd.DataFrame({"call": range(1, 101), "turn": range(1, 101)})
    ax = Figure().subplots()
    _mark_turns(ax, many, most_labels=25)
    labels = [label.get_text() for label in ax.child_axes[0].get_xticklabels()]
    assert labels[:3] == ["1", "5", "9"] and len(labels) == 25


def test_a_compression_is_marked_at_the_prompt_it_compressed_not_the_previous_calls():
    import pandas as pd
    from matplotlib.figure import Figure

    from hermeslab.plots import _mark_compressions

    times = pd.to_datetime(["2026-01-01 10:00:00", "2026-01-01 10:00:10", "2026-01-01 10:00:30"])
    usage = pd.DataFrame({"call": [1, 2, 3], "prompt_tokens": [1_200, 2_046, 1_500], "created_at": times})
    compressions = pd.DataFrame({"created_at": pd.to_datetime(["2026-01-01 10:00:20"] * 2),
                                 "tokens_before": [3_900, 3_900], "prompt_tokens_before": [4_341, None]})
    ax = Figure().subplots()
    _mark_compressions(ax, compressions, usage)
    marked = [tuple(collection.get_offsets()[0]) for collection in ax.collections]
    assert marked == [(2.5, 4_341), (2.5, 2_046)]  # a row logged without the prompt figure: the call before
