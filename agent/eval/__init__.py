"""Evaluation: metrics, the resumable side-by-side harness (``ambigqa eval``) and LLM-free benchmarks (``bench``)."""
