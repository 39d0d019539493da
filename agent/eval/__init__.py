"""Evaluation: metrics that score a method's ``RunResult`` against gold data (grounded metrics in ``grounded``)."""
