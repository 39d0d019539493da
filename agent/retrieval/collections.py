"""Open a collection by name on the configured store: PostgreSQL when ``AMBIGQA_DATABASE_URL`` is set, else Chroma.
The demo collection is ingested from the package's own corpus on first use."""

from __future__ import annotations

import sys
import threading
from importlib.resources import as_file

from agent.errors import CollectionError
from agent.resources import data_file
from agent.retrieval.embeddings import MiniLMEmbeddingFunction
from agent.retrieval.store import Store, check_name
from agent.settings import Settings, get_settings

DEMO_COLLECTION = "demo"
_demo_lock = threading.Lock()


def open_store(name: str | None = None, settings: Settings | None = None) -> Store:
    """The collection ``name`` (default: the ``collection`` setting); missing or empty ones are a ``CollectionError``."""
    settings = settings or get_settings()
    name = name or settings.collection
    if name == DEMO_COLLECTION:
        ensure_demo(settings)
    store = open_collection(name, settings)
    if store.empty():
        raise CollectionError(
            f"collection '{name}' is empty: run `ambigqa ingest CORPUS.jsonl --collection {name}` first"
        )
    return store


def open_collection(name: str, settings: Settings) -> Store:
    """The collection ``name``, empty or not; a missing one, or a name no collection can have, is a
    ``CollectionError``."""
    check_name(name, CollectionError)
    if settings.database_url:
        from agent.retrieval.postgres_store import PostgresStore

        return PostgresStore.open(settings.database_url, name)
    from agent.retrieval.chroma_store import ChromaStore, get_client

    try:
        collection = get_client(settings).get_collection(name, embedding_function=MiniLMEmbeddingFunction())  # type: ignore[arg-type]  # chromadb's stubs want EmbeddingFunction[Documents|Images]
    except Exception as exc:  # chromadb raises NotFoundError / ValueError depending on client type
        if "does not exist" in str(exc) or "not found" in str(exc).lower():
            raise CollectionError(
                f"collection '{name}' does not exist: run `ambigqa ingest CORPUS.jsonl --collection {name}` first"
            ) from None
        raise CollectionError(f"cannot open collection '{name}': {exc}") from exc
    return ChromaStore(collection, settings)


def list_collections(settings: Settings | None = None) -> list[str]:
    settings = settings or get_settings()
    if settings.database_url:
        from agent.retrieval.postgres_store import collections

        return collections(settings.database_url)
    from agent.retrieval.chroma_store import get_client

    return sorted(c if isinstance(c, str) else c.name for c in get_client(settings).list_collections())


def ensure_demo(settings: Settings) -> None:
    """Ingest ``data/demo/corpus.jsonl`` into the demo collection unless it is there already."""
    with _demo_lock:
        if DEMO_COLLECTION in list_collections(settings):
            try:
                if not open_collection(DEMO_COLLECTION, settings).empty():
                    return
            except CollectionError:
                pass
        print(
            f"first use: embedding the demo corpus into collection '{DEMO_COLLECTION}' (once, about a minute on 2 "
            "cores)",
            file=sys.stderr,
        )
        from agent.retrieval.ingest import ingest

        with as_file(data_file("demo", "corpus.jsonl")) as corpus:
            ingest(corpus, DEMO_COLLECTION, settings=settings, progress=True)
