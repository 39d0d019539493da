"""Process-wide settings from the environment (prefix ``AMBIGQA_``); per-run options live in ``agent.context``."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent.errors import StoreError

DATABASE_SCHEMES = ("postgresql://", "postgres://")  # the URI forms libpq reads
_USERINFO_PASSWORD = re.compile(r"(?<=://)[^:/?#@]*:(?P<password>.*)@(?=[^@]*$)", re.DOTALL)  # up to the last '@'
_QUERY_PASSWORD = re.compile(r"(?<=[?&]password=)(?P<password>[^&#]*)", re.IGNORECASE)


def _passwords(url: str) -> set[str]:
    """Every password ``url`` carries (in its user info or its query), as written and percent-decoded."""
    found = {m["password"] for pattern in (_USERINFO_PASSWORD, _QUERY_PASSWORD) for m in pattern.finditer(url)}
    return {form for password in found for form in (password, unquote(password)) if form}


def redact(text: str, url: str) -> str:
    """``text`` (an error, a log line, the URL itself) with every password of the database URL ``url`` as ``***``."""
    for password in sorted(_passwords(url), key=len, reverse=True):
        text = text.replace(password, "***")
    return text


def check_database_url(url: str) -> str:
    """``url`` if libpq reads it as a PostgreSQL URL; else a one-line ``StoreError`` showing it without its password
    (a ``StoreError``, not a ``ValueError``: pydantic would quote the URL whole in its validation error)."""
    shown = redact(url, url)
    if not url.startswith(DATABASE_SCHEMES):
        raise StoreError(
            f"the database URL {shown!r} (AMBIGQA_DATABASE_URL or --store) is not a PostgreSQL URL: write "
            "postgresql://USER:PASSWORD@HOST:5432/DATABASE"
        )
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(url)
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise StoreError(
            f"the database URL {shown!r} (AMBIGQA_DATABASE_URL or --store) cannot be read: {redact(reason, url)}"
        ) from None
    return url


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AMBIGQA_", env_file=".env", extra="ignore")

    home: Path = Field(default=Path.home() / ".cache" / "ambigqa", description="Chroma store and server logs.")
    model_dir: Path = Field(
        default=Path.home() / ".cache" / "ambigqa" / "models", description="assembled GGUF files, ONNX exports"
    )
    chroma_url: str | None = Field(default=None, description="Chroma server URL; unset = embedded store under home.")
    database_url: str | None = Field(
        default=None,
        description="PostgreSQL (with pgvector) URL for passages and clarify threads; unset = embedded Chroma and SQLite",
        repr=False,  # it may carry a password
    )
    hnsw_ef_search: int = Field(
        default=400,
        ge=10,
        le=1000,
        description="HNSW candidates per dense query (recall against speed; docs/deploy.md)",
    )
    collection: str = "demo"
    embeddings: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="encoder for new collections: onnx (INT8, exported once into model_dir) | torch "
        "(sentence-transformers, also onnx's fallback); a collection is always read with its own",
    )

    llm: str = Field(default="local", description="local | openai | fake | a name registered in agent.llm.factory")
    local_model: Literal["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"] = "qwen2.5-coder-1.5b"
    local_threads: int = Field(default=0, description="llama.cpp threads; 0 = all cores")
    local_ctx: int = 4096
    local_state_cache_mb: int = Field(
        default=1024,
        ge=0,
        description="memory for llama.cpp states kept across prompt families, so a method's fixed instructions are "
        "prefilled once per server, not once per question; 0 = only the previous prompt's prefix is reused",
    )
    local_disk_states_mb: int = Field(
        default=512,
        ge=0,
        description="disk for the llama.cpp states of system messages other content follows (a fixed casebook, a "
        "method's instruction), under $AMBIGQA_HOME/llm-states, so a new server starts with them evaluated; 0 = off",
    )
    local_draft_tokens: int = Field(
        default=0,
        ge=0,
        le=32,
        description="prompt-lookup speculative decoding: tokens guessed from the prompt's own n-grams per step (answers "
        "that copy names and dates from the passages); 0 = off, and the server computes logits for the last prompt "
        "token only",
    )
    local_port: int = Field(default=0, description="port of the embedded llama.cpp server; 0 = a free one")
    local_startup_timeout: float = 180.0
    local_repack: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="llama.cpp weight repacking at load (faster matrix kernels): auto = on, except on CPUs with AMX, "
        "where llama.cpp's AMX path crashes, and after the server died by a signal with it on",
    )

    openai_base_url: str | None = None
    openai_api_key: str | None = Field(default=None, repr=False)
    openai_model: str = "gpt-4o-mini"

    fake_latency: float = Field(default=0.0, description="seconds each call of the `fake` model sleeps (load tests)")

    llm_timeout: float | None = Field(
        default=None,
        description="seconds to wait for an LLM reply; None: 20 for a remote endpoint, 600 for the embedded model "
        "(it prefills long prompts on the CPU)",
    )
    llm_connect_timeout: float = Field(default=5.0, description="seconds to connect to the LLM endpoint")
    llm_max_retries: int = Field(default=1, description="transport retries per LLM request")

    def reply_timeout(self, local: bool) -> float:
        return self.llm_timeout if self.llm_timeout is not None else (600.0 if local else 20.0)

    max_question_chars: int = 2000
    max_given_passages: int = Field(default=100, ge=1, description="passages a caller may give one run to read")
    max_given_passage_chars: int = Field(default=20_000, ge=100, description="characters of one given passage")
    max_passage_words: int = Field(
        default=300, ge=20, description="words of a passage shown to the LLM (a few ASQA passages run to 5,000)"
    )

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, url: str | None) -> str | None:
        return check_database_url(url) if url else url

    @property
    def chroma_path(self) -> Path:
        return self.home / "chroma"

    def replace(self, **changes: Any) -> Settings:
        """These settings with some fields changed and validated; a change of ``None`` keeps the field as it is."""
        return Settings(**(self.model_dump() | {k: v for k, v in changes.items() if v is not None}))


_installed: list[Settings] = []


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings: the ones ``use_settings`` installed, else the environment's (read once; ``cache_clear``
    reads it again)."""
    return _installed.pop() if _installed else Settings()


def use_settings(settings: Settings) -> Settings:
    """Make ``settings`` the process's settings: a surface built them from its options, and the layers below it (the
    LLM factory, the store, the clarify threads) read ``get_settings()``."""
    get_settings.cache_clear()
    _installed[:] = [settings]
    return get_settings()
