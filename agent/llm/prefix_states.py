"""Which llama.cpp KV states the embedded server keeps between prompt families: a pure policy over token sequences.

The child server (``agent.llm.server_child``) saves and restores the states; this module decides which to keep, which
to load, and how many prompt tokens llama.cpp will not evaluate again, and keeps the system messages' states on disk
(``DiskStates``) so a new process starts warm.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` have in common."""
    shared = 0
    for x, y in zip(a, b):
        if x != y:
            break
        shared += 1
    return shared


def reused_prefix(cached: Sequence[int], prompt: Sequence[int], evaluated: int) -> int:
    """The prompt tokens llama.cpp will not evaluate again: the prefix ``prompt`` shares with the ``evaluated``
    tokens of the cached sequence, less one when the whole prompt matches (its last token is replayed for logits)."""
    if evaluated <= 0:
        return 0
    shared = common_prefix(cached[:evaluated], prompt)
    return shared - 1 if shared == len(prompt) and shared > 0 else shared


@dataclass(frozen=True)
class SavedState:
    """A llama.cpp KV state as ``llama_state_get_data`` wrote it, and the tokens it holds."""

    tokens: tuple[int, ...]
    data: np.ndarray  # uint8

    @property
    def nbytes(self) -> int:
        return self.data.nbytes + 8 * len(self.tokens)


class PrefixStates:
    """Saved states of the prompt families the server left, by their tokens, within ``capacity_bytes``.

    A family is the prompts that share ``family_tokens`` or more leading tokens: a method's calls with one
    instruction and examples (VerDICt's execute calls, the same prompt's calls on the next question). Keeping one
    family's state means a different family in between (relax before execute, the answer after it) does not cost
    the next question its instruction's prefill. A newer state replaces its family's older one, and the least
    recently used family goes first when the bytes run out."""

    def __init__(self, capacity_bytes: int, family_tokens: int = 64):
        self.capacity_bytes = capacity_bytes
        self.family_tokens = family_tokens
        self.saved: OrderedDict[tuple[int, ...], SavedState] = OrderedDict()

    @property
    def nbytes(self) -> int:
        return sum(state.nbytes for state in self.saved.values())

    def closest(self, tokens: Sequence[int]) -> tuple[SavedState | None, int]:
        """The saved state sharing the longest prefix with ``tokens``, and that length (None, 0 if none shares)."""
        best, length = None, 0
        for key, state in self.saved.items():
            shared = common_prefix(key, tokens)
            if shared > length:
                best, length = state, shared
        if best is not None:
            self.saved.move_to_end(best.tokens)
        return best, length

    def keep(self, state: SavedState) -> None:
        """Save ``state``, replacing its family's older one; drop the least recently used past the capacity."""
        older, shared = self.closest(state.tokens)
        if older is not None and shared >= self.family_tokens:
            del self.saved[older.tokens]
        self.saved[state.tokens] = state
        while self.nbytes > self.capacity_bytes and self.saved:
            self.saved.popitem(last=False)

    def switch_to(
        self, live: Sequence[int], prompt: Sequence[int], save: Callable[[], SavedState]
    ) -> SavedState | None:
        """Before evaluating ``prompt`` with the ``live`` tokens in memory: when ``prompt`` leaves the live family, keep
        the live state (``save`` reads it) and return the kept state to load, one sharing more of ``prompt`` than the
        live one does; None keeps what is live."""
        in_memory = common_prefix(live, prompt)
        if in_memory >= self.family_tokens:
            return None
        if len(live) > 0:
            self.keep(save())
        state, shared = self.closest(prompt)
        return state if state is not None and shared > in_memory else None


SPREAD = (
    64  # tokens after the system message two prompts may still share (the next turn's header, a heading) and differ in
)


def shared_instruction(live: Sequence[int], prompt: Sequence[int], end: int) -> bool:
    """Whether ``live`` and ``prompt`` share the system message that ends at ``end`` and then differ at once: a
    prefix that other content follows (the next question under a fixed casebook, the next passage under VerDICt's
    execute instruction), so worth keeping on disk. Calls that share more (one question's passages) are not it."""
    return end > 0 and end <= common_prefix(live, prompt) <= end + SPREAD


class DiskStates:
    """States of system messages on disk, one file each, so a new server process starts with them evaluated.

    ``folder`` names the model, the llama.cpp build and the context size the states were made with (a state loads
    only into the same); files go least recently used first past ``capacity_bytes``."""

    def __init__(self, folder: Path, capacity_bytes: int, min_tokens: int = 64):
        self.folder, self.capacity_bytes, self.min_tokens = folder, capacity_bytes, min_tokens

    def path(self, tokens: Sequence[int]) -> Path:
        digest = hashlib.sha256(np.asarray(tokens, dtype=np.int32).tobytes()).hexdigest()[:32]
        return self.folder / f"{digest}.npz"

    def worth_keeping(self, tokens: Sequence[int]) -> bool:
        return len(tokens) >= self.min_tokens and not self.path(tokens).is_file()

    def load(self, tokens: Sequence[int]) -> SavedState | None:
        """The state of exactly ``tokens`` (a system message), or None; a file that does not read is removed."""
        path = self.path(tokens)
        try:
            with np.load(path, allow_pickle=False) as stored:
                state = SavedState(tuple(int(t) for t in stored["tokens"]), stored["data"])
        except (OSError, ValueError, KeyError):
            path.unlink(missing_ok=True)
            return None
        if state.tokens != tuple(tokens):
            path.unlink(missing_ok=True)
            return None
        os.utime(path)  # recently used
        return state

    def save(self, state: SavedState) -> None:
        """Write ``state`` (atomically: processes may share the folder), then drop the least recently used files
        past the capacity."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(state.tokens)
        tmp = path.with_suffix(f".tmp-{os.getpid()}.npz")
        np.savez(tmp, tokens=np.asarray(state.tokens, dtype=np.int32), data=state.data)
        tmp.replace(path)
        others = sorted((f for f in self.folder.glob("*.npz") if f != path), key=lambda f: f.stat().st_mtime_ns)
        total = path.stat().st_size + sum(f.stat().st_size for f in others)
        for old in others:
            if total <= self.capacity_bytes:
                break
            total -= old.stat().st_size
            old.unlink(missing_ok=True)

    def forget(self, tokens: Sequence[int]) -> None:
        """Remove a state llama.cpp refused (another build wrote it)."""
        self.path(tokens).unlink(missing_ok=True)
