import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.runtime.detokenizer import StreamingDetokenizer


def run(pieces, stops=()):
    detok = StreamingDetokenizer(tuple(stops))
    shown = [detok.feed(piece) for piece in pieces]
    shown.append(detok.finish())
    return shown, detok.stopped


def test_a_character_split_across_tokens_is_shown_whole():
    smile = "🙂".encode()  # four bytes, as a byte-fallback vocabulary emits them
    shown, _ = run([b"hi ", smile[:1], smile[1:3], smile[3:], b"!"])
    assert shown == ["hi ", "", "", "🙂", "!", ""]
    assert "\ufffd" not in "".join(shown)


def test_an_unfinished_character_at_the_end_becomes_a_replacement_character():
    shown, _ = run([b"ok", "é".encode()[:1]])
    assert "".join(shown) == "ok\ufffd"


@pytest.mark.parametrize(
    "pieces, stops, shown, stopped",
    [
        ([b"Hello", b" User", b":", b" hi"], ["User:"], ["Hello", " ", "", "", ""], True),
        ([b"Hel", b"lo Us", b"ually"], ["User:"], ["Hel", "lo ", "Usually", ""], False),
        ([b"a</", b"s", b">b"], ["</s>"], ["a", "", "", ""], True),
        ([b"ab", b"c"], ["abc", "b"], ["", "", ""], True),
        ([b"x<"], ["<end>"], ["x", "<"], False),
        ([b"><", b"<<"], ["<", "><<"], ["", "", ""], True),
        ([b"stop"], [""], ["stop", ""], False),
    ],
)
def test_stop_strings_spanning_tokens(pieces, stops, shown, stopped):
    assert run(pieces, stops) == (shown, stopped)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("ab\u00e9\U0001f642\n<>/"), max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12),
    stops=st.lists(
        st.text(alphabet=st.sampled_from("ab<>/\u00e9"), min_size=1, max_size=4), max_size=3
    ),
)
def test_output_is_the_text_cut_at_the_first_stop_string(text, cuts, stops):
    data = text.encode()
    edges = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    pieces = [data[a:b] for a, b in itertools.pairwise(edges)]
    shown, stopped = run(pieces, stops)
    hits = [i for i in (text.find(s) for s in stops) if i >= 0]
    expected = text[: min(hits)] if hits else text
    assert "".join(shown) == expected
    assert stopped == bool(hits)
