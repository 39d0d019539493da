"""The embedded server's choice of KV states to keep and load (``agent.llm.prefix_states``): a pure policy."""

import numpy as np
import pytest

from agent.llm.prefix_states import PrefixStates, SavedState, reused_prefix


def test_the_reused_prefix_is_what_llama_cpp_does_not_evaluate_again():
    assert reused_prefix([1, 2, 3, 9], [1, 2, 3, 4, 5], evaluated=4) == 3
    assert reused_prefix([1, 2, 3, 9], [1, 2, 3, 4, 5], evaluated=2) == 2  # only evaluated tokens are cached
    assert reused_prefix([1, 2, 3], [1, 2, 3], evaluated=3) == 2  # the last token is replayed for its logits
    assert reused_prefix([7, 2], [1, 2], evaluated=2) == 0
    assert reused_prefix([], [1, 2], evaluated=0) == 0


def _state(tokens: list[int], nbytes: int = 1_000) -> SavedState:
    return SavedState(tuple(tokens), np.zeros(nbytes, dtype=np.uint8))


def test_kept_states_are_one_per_prompt_family_and_stay_within_their_bytes():
    states = PrefixStates(capacity_bytes=10_000, family_tokens=4)
    relax, execute = [1, 2, 3, 4, 5, 6], [9, 8, 7, 6, 5, 4, 3]
    assert states.closest(execute) == (None, 0)
    states.keep(_state(relax + [100], 1_000))
    states.keep(_state(execute + [200], 1_000))
    states.keep(_state(execute + [201, 202], 1_000))  # the same family: replaces the older state
    assert len(states.saved) == 2
    found, shared = states.closest(execute + [300])  # a later execute call finds its family's newest state
    assert found.tokens == tuple(execute + [201, 202]) and shared == len(execute)
    assert states.closest(relax + [7])[0].tokens == tuple(relax + [100])  # relax's survived the execute calls
    for family in range(10):  # unrelated prompts: the least recently used go once the bytes are spent
        states.keep(_state([50 + family] * 6, 2_500))
    assert states.nbytes <= 10_000 and len(states.saved) == 3
    assert states.closest([50] * 6) == (None, 0) and states.closest([59] * 6)[1] == 6
    assert states.closest(relax)[0] is None


def test_within_a_family_the_live_state_stays_and_nothing_is_saved():
    states = PrefixStates(capacity_bytes=10_000, family_tokens=4)
    saved = []
    live = [1, 2, 3, 4, 5, 6, 7]
    assert states.switch_to(live, [1, 2, 3, 4, 9], lambda: saved.append(1) or _state(live)) is None
    assert saved == [] and not states.saved


def test_leaving_a_family_saves_the_live_state_and_loads_the_closer_kept_one():
    states = PrefixStates(capacity_bytes=10_000, family_tokens=4)
    relax, execute = [1, 2, 3, 4, 5, 6], [9, 8, 7, 6, 5, 4]
    states.keep(_state(relax + [100]))
    load = states.switch_to(execute + [200], relax + [7], lambda: _state(execute + [200]))
    assert load is not None and load.tokens == tuple(relax + [100])  # relax's state comes back for relax's prompt
    assert tuple(execute + [200]) in states.saved  # and the execute family's state is kept for its next call
    back = states.switch_to(relax + [100], execute + [300], lambda: _state(relax + [100]))
    assert back is not None and back.tokens == tuple(execute + [200])


def test_an_empty_context_saves_nothing_and_a_new_family_loads_nothing():
    states = PrefixStates(capacity_bytes=10_000, family_tokens=4)
    assert states.switch_to([], [1, 2, 3, 4, 5], lambda: pytest.fail("nothing to save")) is None
    states.keep(_state([7, 7, 7, 7, 7]))
    assert states.switch_to([1, 2, 3], [8, 8, 8, 8], lambda: _state([1, 2, 3])) is None
