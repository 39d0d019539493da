"""Passages in and out: embeddings, the Chroma store and ingest, BM25, cross-encoder re-ranking, and SUNAR's
neighbourhood graph with Neighbourhood Aware Retrieval."""
