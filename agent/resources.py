"""Files the package ships: the prompts (``prompts/``) and data (``data/``), read with ``importlib.resources``.

The repository keeps them in its top-level folders, where a reader edits them; ``pyproject.toml`` maps those folders
to the packages ``agent.prompts`` and ``agent.data``, so a wheel carries them and an editable install reads them in
place.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

from agent.errors import ConfigError


def _package(name: str) -> Traversable:
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
