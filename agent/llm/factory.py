"""The LLM factory: one LangChain chat model per provider name (``local``, ``openai``, ``fake`` or a registered one)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from langchain_core.language_models import BaseChatModel

from agent.errors import ConfigError
from agent.settings import Settings, get_settings

PROVIDERS = ("local", "openai", "fake")

_registry: dict[str, BaseChatModel] = {}
_local_models: dict[str, BaseChatModel] = {}
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


def _openai_compatible(
    base_url: str | None, api_key: str, model: str, settings: Settings, llama_cpp: bool = False
) -> BaseChatModel:
    import httpx
    from langchain_openai import ChatOpenAI

    from agent.llm.openai_client import LlamaCppChat

    return (LlamaCppChat if llama_cpp else ChatOpenAI)(
        base_url=base_url,
        api_key=api_key,
        model=model,
        timeout=httpx.Timeout(settings.reply_timeout(llama_cpp), connect=settings.llm_connect_timeout),
        max_retries=settings.llm_max_retries,
    )


def get_chat_model(name: str | None = None, settings: Settings | None = None) -> BaseChatModel:
    settings = settings or get_settings()
    name = name or settings.llm
    with _lock:
        if name in _registry:
            return _registry[name]
    if name == "fake":
        from agent.llm.scripted import demo_model

        model = demo_model(settings.fake_latency)
    elif name == "local":
        from agent.llm.local_server import local_server

        url = local_server(settings).url
        with _lock:
            if url not in _local_models:  # one client per server; a restarted server gets a new port
                _local_models[url] = _openai_compatible(url, "local", "local", settings, llama_cpp=True)
            return _local_models[url]
    elif name == "openai":
        if not settings.openai_api_key and not settings.openai_base_url:
            raise ConfigError(
                "--llm openai needs AMBIGQA_OPENAI_API_KEY (and AMBIGQA_OPENAI_BASE_URL for other servers)"
            )
        model = _openai_compatible(
            settings.openai_base_url, settings.openai_api_key or "none", settings.openai_model, settings
        )
    else:
        raise ConfigError(f"unknown LLM provider '{name}': choose one of {', '.join(PROVIDERS)} or register a model")
    register_model(name, model)
    return model


def json_response_format(name: str | None, schema: dict) -> dict | None:
    """The ``response_format`` that constrains output to ``schema`` on this provider, if it has one."""
    name = name or get_settings().llm
    if name == "local":  # llama-cpp-python's server: json_object + schema → grammar (json_schema type is rejected)
        return {"type": "json_object", "schema": schema}
    if name == "openai":
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": False}}
    return None


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
