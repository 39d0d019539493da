"""Ingest figures: passages/s into a fresh store, and the two embedding backends (ONNX INT8, torch) side by side."""

from __future__ import annotations

import hashlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from agent.errors import ConfigError
from agent.eval.datasets import Example, load_examples
from agent.eval.resume import save_batch, saved_batches

if TYPE_CHECKING:
    from agent.retrieval.embeddings import Backend

BACKENDS: tuple[Backend, ...] = ("onnx", "torch")


def ingest_rate(corpus: Path, sample: int = 512) -> dict[str, Any]:
    """Passages/s embedding and storing ``sample`` passages into a fresh store, and the unchanged re-run's time."""
    from agent.retrieval.ingest import ingest
    from agent.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / "sample.jsonl"
        with corpus.open() as src, part.open("w") as dst:
            for _, line in zip(range(sample), src):
                dst.write(line)
        settings = Settings(home=Path(tmp) / "home")
        first = ingest(part, "bench", settings=settings, progress=False)
        again = ingest(part, "bench", settings=settings, progress=False)
    return {
        "passages": first.added,
        "passages_per_s": round(first.passages_per_s, 1),
        "rerun_s": again.seconds,
        "backend": first.backend,
    }


def ingest_suite(
    corpus: Path,
    dataset: Path,
    limit: int | None = None,
    vectors: Path | None = None,
    chunk: int = 128,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Both embedding backends over the same passages (the first ``limit``, default all) in ingest's batches, taking
    turns per batch so both see the same machine load: passages/s each, their vectors' cosine agreement and, on the
    ASQA corpus with no passage left out, each one's dense top-5 MRecall@5 on the dev questions beside it (exact
    search over in-memory vectors; no stored collection is touched). With ``vectors`` (a folder) each batch's vectors
    and seconds are kept there and a re-run resumes, so the slow torch pass can be split over several runs."""
    from agent.retrieval.embeddings import embed, model_path, usable
    from agent.retrieval.ingest import read_corpus
    from agent.retrieval.onnx_encoder import model_file
    from agent.retrieval.store import content_id
    from agent.schemas import titled_text
    from agent.settings import get_settings

    records = list({content_id(r.title, r.text): r for r in read_corpus(corpus)}.values())[:limit]
    texts = [titled_text(r.title, r.text) for r in records]
    if usable("onnx") != "onnx":
        raise ConfigError("the ONNX encoder is unavailable (see the warning above): nothing to compare torch with")
    for backend in BACKENDS:
        embed(["load the encoder before timing"] * 16, backend=backend)
    export = model_file(model_path(), get_settings().model_dir).name  # names the weights and the export recipe
    key = hashlib.sha256(json.dumps([[content_id(r.title, r.text) for r in records], export]).encode()).hexdigest()
    done = _embed_in_turns(texts, chunk, vectors / key[:16] if vectors else None)
    matrices = {b: np.concatenate([done[s][b] for s in sorted(done)]) for b in BACKENDS}
    report = _speed_and_agreement(len(texts), _seconds(done), matrices)
    beside = corpus.resolve().parent == dataset.resolve().parent
    examples = [e for e in load_examples(dataset) if e.qa_pairs] if beside and limit is None else []
    if examples:
        log(f"MRecall@5 on {len(examples)} questions, dense top-5 over {len(texts):,} passages …")
        for backend in BACKENDS:
            report[backend]["mrecall@5"] = _dense_mrecall(examples, texts, matrices[backend], backend)
        report["questions"] = len(examples)
    return report


def _embed_in_turns(texts: list[str], chunk: int, folder: Path | None) -> dict[int, dict[str, np.ndarray]]:
    """Each batch's vectors from both backends and their seconds (the order alternating by batch), by start; batches
    kept in ``folder`` are not embedded again and new ones are kept there."""
    from agent.retrieval.embeddings import embed

    done = saved_batches(folder)
    initial = sum(len(b["onnx"]) for b in done.values())
    bar = tqdm(total=len(texts), initial=initial, unit="passage", desc="embedding with onnx and torch in turns")
    for start in range(0, len(texts), chunk):
        if start in done:
            continue
        batch, got, seconds = texts[start : start + chunk], {}, {}
        for backend in BACKENDS if (start // chunk) % 2 == 0 else BACKENDS[::-1]:
            began = time.perf_counter()
            got[backend] = embed(batch, backend=backend)
            seconds[backend] = time.perf_counter() - began
        done[start] = got | {"seconds": np.array([seconds[b] for b in BACKENDS])}
        if folder:
            save_batch(folder, start, done[start])
        bar.update(len(batch))
        bar.set_postfix_str(", ".join(f"{b} {bar.n / s:.1f}/s" for b, s in _seconds(done).items()))
    bar.close()
    return done


def _seconds(done: dict[int, dict[str, np.ndarray]]) -> dict[str, float]:
    """Each backend's embedding seconds over the batches done."""
    return dict(zip(BACKENDS, np.sum([b["seconds"] for b in done.values()], axis=0).tolist()))


def _speed_and_agreement(
    passages: int, totals: dict[str, float], matrices: dict[Backend, np.ndarray]
) -> dict[str, Any]:
    """Passages/s of each backend, the speed-up and the cosine of each passage's two vectors."""
    agreement = np.sum(matrices["onnx"] * matrices["torch"], axis=1)
    return {
        "passages": passages,
        **{b: {"passages_per_s": round(passages / totals[b], 1), "seconds": round(totals[b], 1)} for b in BACKENDS},
        "speedup": round(totals["torch"] / totals["onnx"], 2),
        "cosine_mean": round(float(agreement.mean()), 5),
        "cosine_min": round(float(agreement.min()), 5),
    }


def _dense_mrecall(examples: list[Example], texts: list[str], matrix: np.ndarray, backend: Backend) -> float:
    """MRecall@5 of exact dense top-5 search over ``matrix`` with the questions embedded by ``backend``."""
    from agent.eval.metrics import mrecall_at_k
    from agent.retrieval.embeddings import embed

    similarity = embed([e.question for e in examples], backend=backend) @ matrix.T
    top = np.argsort(-similarity, axis=1, kind="stable")[:, :5]
    hits = [mrecall_at_k([texts[i] for i in row], e.short_answers, 5) for row, e in zip(top, examples)]
    return round(statistics.fmean(hits), 4)


def format_ingest(i: dict[str, Any]) -> list[str]:
    if "onnx" not in i:
        return [
            f"- ingest ({i.get('backend', 'torch')}): {i['passages_per_s']} passages/s ({i['passages']} passages); "
            f"unchanged re-run {i['rerun_s']} s"
        ]
    lines = [
        f"- embedding {i['passages']:,} passages: onnx (INT8) {i['onnx']['passages_per_s']} passages/s, torch "
        f"{i['torch']['passages_per_s']} passages/s ({i['speedup']}×); cosine onnx vs torch mean "
        f"{i['cosine_mean']}, min {i['cosine_min']}"
    ]
    if "questions" in i:
        lines.append(
            f"- dense MRecall@5 on {i['questions']} questions: onnx {i['onnx']['mrecall@5']:.3f}, torch "
            f"{i['torch']['mrecall@5']:.3f}"
        )
    return lines
