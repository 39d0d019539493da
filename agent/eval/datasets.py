"""Evaluation sets in the format of ``../shared/data``: ASQA-style (qa_pairs, long_answers) or HotpotQA-style (answers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from agent.errors import ConfigError


class GoldPair(BaseModel):
    question: str
    short_answers: list[str]


class Example(BaseModel):
    id: str
    question: str
    qa_pairs: list[GoldPair] = Field(default_factory=list)
    long_answers: list[str] = Field(default_factory=list)
    answers: list[str] = Field(default_factory=list)
    supporting_ids: list[str] = Field(default_factory=list)

    @property
    def kind(self) -> Literal["asqa", "hotpotqa"]:
        return "asqa" if self.qa_pairs else "hotpotqa"

    @property
    def short_answers(self) -> list[list[str]]:
        return [p.short_answers for p in self.qa_pairs]


def load_examples(path: Path, limit: int | None = None) -> list[Example]:
    if not path.is_file():
        raise ConfigError(f"dataset {path} does not exist")
    examples = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                row["id"] = str(row.get("id", number))
                example = Example.model_validate(row)
            except (json.JSONDecodeError, ValidationError) as exc:
                raise ConfigError(
                    f"{path}:{number}: not an ASQA- or HotpotQA-style record ({str(exc).splitlines()[0]})"
                ) from None
            if not example.qa_pairs and not example.answers:
                raise ConfigError(f"{path}:{number}: record has neither qa_pairs nor answers")
            examples.append(example)
            if limit and len(examples) >= limit:
                break
    return examples
