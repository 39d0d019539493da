"""Evaluation sets in the format of ``../shared/data``: ASQA-style (qa_pairs, long_answers), HotpotQA-style (answers) or
RAMDocs (documents, gold_answers, wrong_answers), each in its own format."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from agent.errors import ConfigError


class GoldPair(BaseModel):
    question: str
    short_answers: list[str]


class Document(BaseModel):
    """A RAMDocs document: its text, its ``type`` (correct, misinfo or noise) and the answer it supports."""

    text: str
    type: Literal["correct", "misinfo", "noise"]
    answer: str = ""


class Example(BaseModel):
    id: str
    question: str
    qa_pairs: list[GoldPair] = Field(default_factory=list)
    long_answers: list[str] = Field(default_factory=list)
    answers: list[str] = Field(default_factory=list)
    supporting_ids: list[str] = Field(default_factory=list)
    documents: list[Document] = Field(default_factory=list)
    gold_answers: list[str] = Field(default_factory=list)
    wrong_answers: list[str] = Field(default_factory=list)

    @property
    def kind(self) -> Literal["asqa", "hotpotqa", "ramdocs"]:
        if self.documents:
            return "ramdocs"
        return "asqa" if self.qa_pairs else "hotpotqa"

    def document_id(self, index: int) -> str:
        """The passage id of the question's ``index``-th document (``<id>-d<index>``)."""
        return f"{self.id}-d{index}"

    def given_passages(self) -> list[dict[str, str]] | None:
        """A RAMDocs question's own documents, what a method reads instead of retrieving; None for other sets."""
        if not self.documents:
            return None
        return [{"id": self.document_id(i), "text": d.text} for i, d in enumerate(self.documents)]

    @property
    def short_answers(self) -> list[list[str]]:
        return [p.short_answers for p in self.qa_pairs]


def load_examples(
    path: Path, limit: int | None = None, offset: int = 0, ids: Sequence[str] | None = None
) -> list[Example]:
    """The records of ``path`` after the first ``offset``, at most ``limit`` of them (a tuning/report split by rows);
    with ``ids``, only the records of those ids within that split (in the file's order; an id the file lacks, or
    holds outside the split, is a ``ConfigError``)."""
    if not path.is_file():
        raise ConfigError(f"dataset {path} does not exist")
    wanted = set(ids or ())
    examples: list[Example] = []
    records, seen = 0, set[str]()
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
                    f"{path}:{number}: not an ASQA-, HotpotQA- or RAMDocs-style record ({str(exc).splitlines()[0]})"
                ) from None
            if not example.qa_pairs and not example.answers and not example.gold_answers:
                raise ConfigError(f"{path}:{number}: record has neither qa_pairs, answers nor gold_answers")
            seen.add(example.id)
            records += 1
            within = records > offset and not (limit and records > offset + limit)
            if within and (not wanted or example.id in wanted):
                examples.append(example)
            elif records > offset and not within and not wanted:
                break  # the split ends here (with ids, read on: each must be in the file)
    if missing := sorted(wanted - seen):
        raise ConfigError(f"{path} has no question with id {', '.join(missing)}")
    if outside := sorted(wanted - {e.id for e in examples}):
        split = f"rows {offset + 1}–{offset + limit}" if limit else f"the rows after {offset}"
        raise ConfigError(f"--ids {', '.join(outside)}: not within {split} of {path} (--offset/--limit)")
    return examples
