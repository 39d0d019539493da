"""The LLM factory: one LangChain chat model per provider name (``local``, ``openai``, ``fake`` or a registered one)."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from weakref import WeakKeyDictionary

from langchain_core.language_models import BaseChatModel

from agent.errors import ConfigError
from agent.settings import Settings, get_settings

PROVIDERS = ("local", "openai", "fake")

Endpoint = tuple[str | None, str, str, bool]  # base URL, API key, model name, whether it is llama-cpp-python's server

_registry: dict[str, BaseChatModel] = {}
_clients: dict[Endpoint, BaseChatModel] = {}
_loop_clients: WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Endpoint, BaseChatModel]] = WeakKeyDictionary()
_lock = threading.Lock()
_model_ids = itertools.count(1)


def register_model(name: str, model: BaseChatModel) -> None:
    """Make ``model`` selectable by name (``llm=name`` in a run's context): how tests inject a scripted model."""
    with _lock:
        _registry[name] = model


def unregister_model(name: str) -> None:
    with _lock:
        _registry.pop(name, None)


@contextmanager
def model_name(llm: str | BaseChatModel | None) -> Iterator[str | None]:
    """The provider name to put in a run's context; a chat model object is registered for the block, then dropped."""
    if not isinstance(llm, BaseChatModel):
        yield llm
        return
    name = f"model-{next(_model_ids)}"
    register_model(name, llm)
    try:
        yield name
    finally:
        unregister_model(name)


def _openai_compatible(endpoint: Endpoint, settings: Settings, for_loop: bool) -> BaseChatModel:
    import openai
    from langchain_openai import ChatOpenAI

    from agent.llm.openai_client import LlamaCppChat

    base_url, api_key, model, llama_cpp = endpoint
    # The SDK's own Timeout and client classes: openai 3 runs on httpx2 and refuses httpx's objects.
    timeout = openai.Timeout(settings.reply_timeout(llama_cpp), connect=settings.llm_connect_timeout)
    return (LlamaCppChat if llama_cpp else ChatOpenAI)(
        base_url=base_url,
        api_key=api_key,
        model=model,
        timeout=timeout,
        max_retries=settings.llm_max_retries,
        http_async_client=openai.DefaultAsyncHttpxClient(timeout=timeout) if for_loop else None,
    )


def _client(endpoint: Endpoint, settings: Settings, loop: asyncio.AbstractEventLoop | None) -> BaseChatModel:
    """One client per endpoint, and for async calls one per event loop: an async HTTP connection belongs to the loop
    that opened it, and LangChain would share one async connection pool per endpoint across loops."""
    with _lock:
        clients = _clients if loop is None else _loop_clients.setdefault(loop, {})
        if endpoint not in clients:
            clients[endpoint] = _openai_compatible(endpoint, settings, for_loop=loop is not None)
        return clients[endpoint]


def get_chat_model(
    name: str | None = None, settings: Settings | None = None, loop: asyncio.AbstractEventLoop | None = None
) -> BaseChatModel:
    """The chat model for ``name``; with ``loop``, the one whose async client belongs to that event loop."""
    settings = settings or get_settings()
    name = name or settings.llm
    with _lock:
        if name in _registry:
            return _registry[name]
    if name == "fake":
        from agent.llm.scripted import demo_model

        register_model(name, demo_model(settings.fake_latency))
        return _registry[name]
    if name == "local":
        from agent.llm.server_launcher import local_server

        return _client(
            (local_server(settings).url, "local", "local", True), settings, loop
        )  # a restarted server: new port
    if name == "openai":
        if not settings.openai_api_key and not settings.openai_base_url:
            raise ConfigError(
                "--llm openai needs AMBIGQA_OPENAI_API_KEY (and AMBIGQA_OPENAI_BASE_URL for other servers)"
            )
        endpoint = (settings.openai_base_url, settings.openai_api_key or "none", settings.openai_model, False)
        return _client(endpoint, settings, loop)
    raise ConfigError(f"unknown LLM provider '{name}': choose one of {', '.join(PROVIDERS)} or register a model")


def prewarm(name: str | None = None) -> None:
    """Start the embedded server in the background (it loads while retrieval loads the encoder)."""
    if (name or get_settings().llm) != "local":
        return

    def start() -> None:
        try:
            get_chat_model("local")
        except Exception:  # the real call reports it
            pass

    threading.Thread(target=start, name="llm-prewarm", daemon=True).start()
