"""Files the package ships: the prompts (``prompts/``) and data (``data/``), read with ``importlib.resources``.

The repository keeps them in its top-level folders, where a reader edits them; ``pyproject.toml`` maps those folders
to the packages ``agent.prompts`` and ``agent.data``, so a wheel carries them, and code imported from a checkout
reads that checkout's folders.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from agent.errors import ConfigError

CHECKOUT = Path(__file__).resolve().parents[1]


def _package(name: str) -> Traversable:
    """The checkout's own folder when ``agent`` was imported from a checkout, else the installed package.

    An editable install maps ``agent.prompts`` to the folders of the checkout that was installed, so code imported from
    another checkout (a git worktree, a second clone run with the same environment) would read that one's prompts.
    """
    folder = CHECKOUT / name.removeprefix("agent.")
    if (CHECKOUT / "pyproject.toml").is_file() and folder.is_dir():
        return folder
    try:
        return files(name)
    except ModuleNotFoundError:
        raise ConfigError(f"'{name}' is missing: install the package (`pip install -e .` in a checkout)") from None


def prompt_file(name: str) -> Traversable:
    """``prompts/<name>.txt``."""
    return _package("agent.prompts") / f"{name}.txt"


def data_file(*parts: str) -> Traversable:
    """A file under ``data/``, e.g. ``data_file("demo", "corpus.jsonl")``."""
    path = _package("agent.data")
    for part in parts:
        path = path / part
    return path
