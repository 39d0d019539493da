"""Evaluation. ``ambigqa eval``: the run loop (``harness``), per-question metrics (``scoring``, ``metrics``,
``grounded``), resume (``resume``), the summary and its reports (``report``, ``stats``). ``ambigqa bench``: LLM-free
benchmarks (``bench`` and its ``bench_*`` suites, ``scale``)."""
