from engine.runtime.speculative.prompt_lookup import PromptLookup


def _lookup(prompt):
    drafter = PromptLookup(max_ngram=3, min_ngram=1)
    drafter.begin(prompt)
    return drafter


def test_proposes_what_followed_the_longest_earlier_match():
    # "7 8" occurred before, followed by 9 10 11; "8" alone also occurred, followed by 1.
    tokens = [1, 7, 8, 9, 10, 11, 5, 8, 1, 2, 7, 8]
    assert _lookup(tokens).propose(tokens, 3) == [9, 10, 11]


def test_the_latest_of_equal_matches_wins():
    tokens = [4, 5, 1, 4, 5, 2, 3, 4, 5]
    assert _lookup(tokens).propose(tokens, 1) == [2]


def test_no_match_proposes_nothing():
    tokens = [1, 2, 3, 4, 5]
    assert _lookup(tokens).propose(tokens, 4) == []


def test_never_matches_the_last_tokens_themselves():
    tokens = [9, 9]  # the n-gram "9" earlier is followed by the last 9
    assert _lookup(tokens).propose(tokens, 3) == [9]


def test_tokens_arriving_one_at_a_time_are_indexed():
    drafter = _lookup([1, 2, 3])
    tokens = [1, 2, 3]
    assert drafter.propose(tokens, 2) == []
    tokens += [4, 1, 2]
    assert drafter.propose(tokens, 2) == [3, 4]
    tokens += [3, 4, 6, 3]
    assert drafter.propose(tokens, 5) == [4, 6, 3]  # the latest "3" is followed by 4 6 3


def test_the_draft_is_cut_to_the_length_asked():
    tokens = [*range(20), 0, 1]
    assert _lookup(tokens).propose(tokens, 4) == [2, 3, 4, 5]
    assert _lookup(tokens).propose(tokens, 0) == []


def test_min_ngram_two_ignores_single_token_matches():
    drafter = PromptLookup(max_ngram=4, min_ngram=2)
    tokens = [5, 1, 2, 9, 5]
    drafter.begin(tokens)
    assert drafter.propose(tokens, 3) == []
