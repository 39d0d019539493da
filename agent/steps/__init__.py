"""LLM steps the methods are built from: RAC (rag, DIVA, ToC), ambiguity typing and interpretations with their
few-shot demonstrations (DIVA, router), VerDICt's consolidation, and SUNAR's answer equivalence."""
