"""Rebuild data/demo/corpus.jsonl from ../shared/data/asqa (provenance: see data/demo/README.md).

For each demo question: BM25 top 30 for the question, top 8 for each gold disambiguated question, and up to
15 passages from the Wikipedia pages the annotators used. Run: python data/demo/make_corpus.py SHARED_ASQA_DIR
"""

import json
import re
import sys
from pathlib import Path

from rank_bm25 import BM25Okapi

DEMO_QUESTIONS = [0, 1, 2, 3, 4, 9, 13, 21, 183]  # row numbers in dev.jsonl


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def main(asqa: Path) -> None:
    rows = [json.loads(line) for line in (asqa / "dev.jsonl").open()]
    corpus = [json.loads(line) for line in (asqa / "corpus.jsonl").open()]
    bm25 = BM25Okapi([tokens(f"{p['title']} {p['text']}") for p in corpus])
    chosen: dict[str, dict] = {}

    def take(query: str, k: int) -> None:
        scores = bm25.get_scores(tokens(query))
        for i in sorted(range(len(corpus)), key=lambda i: -scores[i])[:k]:
            chosen.setdefault(corpus[i]["id"], corpus[i])

    for n in DEMO_QUESTIONS:
        row = rows[n]
        take(row["question"], 30)
        for pair in row["qa_pairs"]:
            take(pair["question"], 8)
        pages = set(row.get("wikipages") or [])
        for p in [p for p in corpus if p["title"] in pages][:15]:
            chosen.setdefault(p["id"], p)
    out = Path(__file__).with_name("corpus.jsonl")
    with out.open("w") as f:
        for p in sorted(chosen.values(), key=lambda p: p["id"]):
            f.write(json.dumps({"id": p["id"], "title": p["title"], "text": p["text"], "source": p["source"]}) + "\n")
    questions = Path(__file__).with_name("questions.jsonl")
    with questions.open("w") as f:
        for n in DEMO_QUESTIONS:
            f.write(json.dumps(rows[n]) + "\n")
    print(f"{len(chosen)} passages → {out}; {len(DEMO_QUESTIONS)} questions → {questions}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/asqa"))
