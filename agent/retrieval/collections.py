"""Open a collection by name for reading; the demo collection is ingested from the package's own corpus on first use."""

from __future__ import annotations

import sys
import threading
from importlib.resources import as_file
from typing import TYPE_CHECKING

from agent.errors import CollectionError
from agent.resources import data_file
from agent.retrieval.embeddings import MiniLMEmbeddingFunction
from agent.retrieval.ingest import ingest
from agent.retrieval.store import Store, get_client
from agent.settings import Settings, get_settings

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

DEMO_COLLECTION = "demo"
_demo_lock = threading.Lock()


def open_store(name: str | None = None, settings: Settings | None = None) -> Store:
    """The collection ``name`` (default: the ``collection`` setting); missing or empty ones are a ``CollectionError``."""
    settings = settings or get_settings()
    name = name or settings.collection
    client = get_client(settings)
    if name == DEMO_COLLECTION:
        ensure_demo(client, settings)
    try:
        collection = client.get_collection(name, embedding_function=MiniLMEmbeddingFunction())
    except Exception as exc:  # chromadb raises NotFoundError / ValueError depending on client type
        if "does not exist" in str(exc) or "not found" in str(exc).lower():
            raise CollectionError(
                f"collection '{name}' does not exist: run `ambigqa ingest CORPUS.jsonl --collection {name}` first"
            ) from None
        raise CollectionError(f"cannot open collection '{name}': {exc}") from exc
    store = Store(collection)
    if store.count() == 0:
        raise CollectionError(
            f"collection '{name}' is empty: run `ambigqa ingest CORPUS.jsonl --collection {name}` first"
        )
    return store


def ensure_demo(client: ClientAPI, settings: Settings) -> None:
    """Ingest ``data/demo/corpus.jsonl`` into the demo collection unless it is there already."""
    with _demo_lock:
        names = {c if isinstance(c, str) else c.name for c in client.list_collections()}
        if DEMO_COLLECTION in names:
            demo = client.get_collection(DEMO_COLLECTION, embedding_function=MiniLMEmbeddingFunction())
            if demo.count() > 0:
                return
        print(
            f"first use: embedding the demo corpus into collection '{DEMO_COLLECTION}' (once, about a minute on 2 "
            "cores)",
            file=sys.stderr,
        )
        with as_file(data_file("demo", "corpus.jsonl")) as corpus:
            ingest(corpus, DEMO_COLLECTION, settings=settings, progress=True)
