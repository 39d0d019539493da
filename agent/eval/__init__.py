"""Evaluation: metrics, grounded LLM-judge metrics (``grounded``), the resumable harness (``ambigqa eval``) and LLM-free
benchmarks (``bench``)."""
