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


def test_a_system_message_goes_to_disk_when_other_content_follows_it():
    from agent.llm.prefix_states import shared_instruction

    system = list(range(100, 170))  # ends at 70
    assert shared_instruction(system + [1, 2, 3, 50, 51], system + [1, 2, 3, 60, 61], end=70)  # the next question
    assert shared_instruction(system + [1, 2] + [9] * 40 + [5], system + [1, 2] + [9] * 40 + [7], end=70)  # a heading
    assert not shared_instruction(system + [9] * 100 + [5], system + [9] * 100 + [7], end=70)  # one question's passages
    assert not shared_instruction([5] + system[1:] + [1], system + [1], end=70)  # another system message
    assert not shared_instruction([], system + [1], end=70) and not shared_instruction(system, system, end=0)


def test_disk_states_load_only_the_same_tokens_and_stay_within_their_bytes(tmp_path):
    from agent.llm.prefix_states import DiskStates

    disk = DiskStates(tmp_path / "states", capacity_bytes=6_000, min_tokens=4)  # two files of ~2,600 bytes
    system = [7, 8, 9, 10, 11]
    assert disk.worth_keeping(system) and not disk.worth_keeping([7, 8])  # too short to be worth a file
    assert disk.load(system) is None
    disk.save(_state(system, 2_000))
    assert not disk.worth_keeping(system)
    loaded = disk.load(system)
    assert loaded.tokens == tuple(system) and loaded.data.nbytes == 2_000
    assert disk.load(system + [12]) is None and disk.load(system[:4]) is None  # a state of exactly these tokens
    for n in range(3):  # newer states push the least recently used out past the capacity
        disk.save(_state([20 + n] * 5, 2_000))
    assert len(list((tmp_path / "states").glob("*.npz"))) == 2 and disk.load(system) is None
    disk.path([30] * 5).write_bytes(b"not a state")  # a torn or foreign file is dropped, not loaded
    assert disk.load([30] * 5) is None and not disk.path([30] * 5).exists()
    assert not list((tmp_path / "states").glob("*.tmp-*"))
