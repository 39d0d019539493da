"""Passages as prompts show them: long articles are cut so they cannot overflow the model's context."""

from agent.schemas import Passage
from agent.text import passage_text, render_passages

LONG = Passage(id="ww2", title="World War II", text=" ".join(f"w{i}" for i in range(5000)))
SHORT = Passage(id="etna", title="Mount Etna", text="Mount Etna is on Sicily.")


def test_a_long_passage_is_cut_to_the_word_limit_and_marked():
    text = passage_text(LONG, words=50)
    assert text.startswith("World War II | w0 w1") and text.endswith("w49 …") and "w50" not in text


def test_the_default_limit_comes_from_the_settings(monkeypatch):
    from agent.settings import get_settings

    monkeypatch.setenv("AMBIGQA_MAX_PASSAGE_WORDS", "20")
    get_settings.cache_clear()
    try:
        assert passage_text(LONG).endswith("w19 …")
    finally:
        monkeypatch.delenv("AMBIGQA_MAX_PASSAGE_WORDS")
        get_settings.cache_clear()
    assert len(passage_text(LONG).split()) == 300 + 5  # title (3 words), "|", 300 words, "…"


def test_short_passages_are_kept_whole_and_numbered():
    assert (
        render_passages([SHORT, SHORT])
        == "[1] Mount Etna | Mount Etna is on Sicily.\n[2] Mount Etna | Mount Etna is on Sicily."
    )
    assert render_passages([SHORT], numbers=[4]).startswith("[4] Mount Etna")
