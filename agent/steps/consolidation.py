"""Consolidation by density clustering (VerDICt §4.2): scikit-learn's HDBSCAN over unit vectors, one medoid per cluster."""

from __future__ import annotations

import numpy as np
from sklearn.cluster import HDBSCAN

OUTLIER = -1


def hdbscan_labels(
    vectors: np.ndarray, min_cluster_size: int = 2, min_samples: int = 2, single_cluster: bool = False
) -> list[int]:
    """Cluster label per row (``OUTLIER`` for noise) under cosine distance; too few rows to cluster are all outliers.

    ``single_cluster`` lets the whole set be one cluster (scikit-learn's ``allow_single_cluster``): never more
    clusters, often fewer, so it is VerDICt's conservative setting; off, sets with one dense group are all noise.
    """
    if len(vectors) < max(2, min_cluster_size, min_samples):
        return [OUTLIER] * len(vectors)
    clusterer = HDBSCAN(
        min_cluster_size=min_cluster_size,
        min_samples=min_samples,
        metric="cosine",
        allow_single_cluster=single_cluster,
        copy=True,
    )
    return [int(label) for label in clusterer.fit(np.asarray(vectors, dtype=np.float64)).labels_]


def medoid(vectors: np.ndarray, members: list[int]) -> int:
    """The member with the largest summed cosine similarity to its cluster (Algorithm 1 line 13); ties → first."""
    block = vectors[members]
    return members[int(np.argmax((block @ block.T).sum(axis=1)))]


def representatives(vectors: np.ndarray, labels: list[int]) -> list[int]:
    """Row indices kept: each cluster's medoid, in rank order; every row when all are outliers (nothing to trust more)."""
    clusters: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        if label != OUTLIER:
            clusters.setdefault(label, []).append(i)
    if not clusters:
        return list(range(len(labels)))
    return sorted(medoid(vectors, members) for members in clusters.values())
