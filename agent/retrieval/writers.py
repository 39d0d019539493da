"""Open a collection for writing on the configured store (PostgreSQL when ``AMBIGQA_DATABASE_URL`` is set, else
Chroma), creating it on first use."""

from __future__ import annotations

from agent.retrieval.embeddings import Backend, MiniLMEmbeddingFunction
from agent.retrieval.store import Writer, check_name
from agent.settings import Settings, get_settings


def open_writer(name: str, backend: Backend, settings: Settings | None = None) -> Writer:
    """The collection ``name`` for ingest, created (embedded with ``backend``) when it does not exist yet."""
    check_name(name)
    settings = settings or get_settings()
    if settings.database_url:
        from agent.retrieval.postgres_store import PostgresStore

        return PostgresStore.create(settings.database_url, name, backend)
    from agent.retrieval.chroma_store import ChromaStore, get_client

    collection = get_client(settings).get_or_create_collection(
        name,
        # recorded when it is new
        embedding_function=MiniLMEmbeddingFunction(backend),  # type: ignore[arg-type]  # chromadb's stubs want EmbeddingFunction[Documents|Images]
        configuration={"hnsw": {"space": "cosine"}},
    )
    return ChromaStore(collection, settings)
