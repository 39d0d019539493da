"""The LLM factory, the call helper (parse, retry, fallback, usage) and the model-file assembly."""

import asyncio
import socket
import textwrap

import pytest

from agent.errors import ConfigError, ContextOverflowError, LLMError, LLMUnavailableError, ModelFileError
from agent.llm.calls import LLMOptions, OutputError, aask, ask, run_concurrently
from agent.llm.factory import get_chat_model
from agent.llm.formats import json_response_format
from agent.llm.gguf import MODELS, GGUFModel, ensure_gguf
from agent.llm.parsing import parse_disambiguations, parse_yes_no
from agent.llm.scripted import ScriptedChatModel
from agent.schemas import ExtractedPairs


def test_fake_provider_is_a_scripted_model():
    assert isinstance(get_chat_model("fake"), ScriptedChatModel)


def test_unknown_provider_names_the_choices():
    with pytest.raises(ConfigError, match="local, openai, fake"):
        get_chat_model("gpt-99")


def test_openai_provider_without_credentials_is_a_config_error(monkeypatch):
    from agent.settings import Settings

    with pytest.raises(ConfigError, match="AMBIGQA_OPENAI_API_KEY"):
        get_chat_model("openai", Settings(openai_api_key=None, openai_base_url=None))


def test_constrained_output_format_per_provider():
    schema = ExtractedPairs.model_json_schema()
    assert json_response_format("local", schema) == {"type": "json_object", "schema": schema}
    assert json_response_format("openai", schema)["type"] == "json_schema"
    assert json_response_format("fake", schema) is None


def test_prompt_puts_the_shared_prefix_first_and_the_per_call_part_last(scripted):
    name, model = scripted({"rag_extract": "DQ 1: Q?\nDA 1: A"})
    ask("rag_extract", LLMOptions(llm=name), parse=parse_disambiguations, question="Which?")
    system, user = model.calls[0].messages
    assert "DQ 1:" in system.content and "Which?" not in system.content  # without a context: instruction, then call
    ask("rag_extract", LLMOptions(llm=name), parse=parse_disambiguations, prefix="[1] T | text", question="Which?")
    system, user = model.calls[1].messages
    assert system.content == "[1] T | text"  # the question's shared prefix, then the instruction and the call
    assert user.content.index("DQ 1:") < user.content.index("Which?")
    assert user.content.rstrip().endswith("Disambiguations:")


def test_malformed_output_is_retried_then_parsed(scripted):
    name, model = scripted({"rag_extract": ["I cannot help.", "DQ 1: Q?\nDA 1: A"]})
    reply = ask(
        "rag_extract",
        LLMOptions(llm=name, retries=2),
        parse=parse_disambiguations,
        passages="",
        question="q",
        examples="",
    )
    assert reply.parsed and reply.attempts == 2
    assert reply.usage.calls == 2 and reply.usage.input_tokens > 0
    assert [p.answer for p in reply.value] == ["A"]


def test_retries_are_bounded_then_the_fallback_is_used(scripted):
    name, model = scripted({"closed_book": "?"})
    reply = ask(
        "closed_book", LLMOptions(llm=name, retries=1), parse=parse_yes_no, fallback=False, question="q", examples=""
    )
    assert reply.parsed is False and reply.value is False
    assert len(model.calls) == 2


def test_without_fallback_unusable_output_raises(scripted):
    name, _ = scripted({"closed_book": "?"})
    with pytest.raises(OutputError, match="no usable output after 1 attempts"):
        ask("closed_book", LLMOptions(llm=name, retries=0), parse=parse_yes_no, question="q", examples="")


def test_generation_settings_reach_the_model(scripted):
    name, model = scripted({"rag_extract": "Yes"})
    ask(
        "rag_extract",
        LLMOptions(llm=name, temperature=0.3, max_tokens=300),
        parse=parse_yes_no,
        question="q",
    )
    assert model.calls[0].kwargs["temperature"] == 0.3 and model.calls[0].kwargs["max_tokens"] == 300


def test_each_call_sends_the_run_seed_and_a_retry_the_next_one_so_a_run_repeats(scripted):
    name, model = scripted({"rag_extract": ["I cannot help.", "DQ 1: Q?\nDA 1: A"]})
    ask("rag_extract", LLMOptions(llm=name, seed=7), parse=parse_disambiguations, question="q")
    assert [c.kwargs["seed"] for c in model.calls] == [7, 8]
    name, model = scripted({"rag_extract": "DQ 1: Q?\nDA 1: A"})
    ask("rag_extract", LLMOptions(llm=name, seed=None), parse=parse_disambiguations, question="q")
    assert "seed" not in model.calls[0].kwargs  # the endpoint's own sampling


def test_a_retry_of_a_greedy_call_samples_since_greedy_decoding_repeats_the_refused_reply(scripted):
    name, model = scripted({"rag_extract": ["I cannot help.", "I cannot help.", "DQ 1: Q?\nDA 1: A"]})
    ask("rag_extract", LLMOptions(llm=name, temperature=0.0), parse=parse_disambiguations, question="q")
    assert [c.kwargs["temperature"] for c in model.calls] == [0.0, 0.3, 0.3]
    name, model = scripted({"rag_extract": ["I cannot help.", "DQ 1: Q?\nDA 1: A"]})
    ask("rag_extract", LLMOptions(llm=name, temperature=0.7), parse=parse_disambiguations, question="q")
    assert [c.kwargs["temperature"] for c in model.calls] == [0.7, 0.7]  # a sampling run keeps its temperature


def test_unreachable_endpoint_is_a_clear_error(monkeypatch):
    from langchain_openai import ChatOpenAI

    from agent.llm.factory import register_model, unregister_model

    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    register_model(
        "down", ChatOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", model="m", max_retries=0, timeout=2)
    )
    try:
        with pytest.raises(LLMUnavailableError, match="unreachable"):
            ask("closed_book", LLMOptions(llm="down"), parse=parse_yes_no, question="q", examples="")
    finally:
        unregister_model("down")


def test_run_concurrently_keeps_order_and_overlaps():
    import threading

    together = threading.Barrier(6, timeout=30)  # broken unless all six calls are in flight at once

    def work(i):
        together.wait()
        return i * 2

    assert run_concurrently(work, range(6)) == [0, 2, 4, 6, 8, 10]
    assert run_concurrently(lambda i: i, range(3), max_workers=1) == [0, 1, 2]


def _fake_parts(tmp_path, monkeypatch, contents: list[bytes], prefix: str) -> None:
    for i, data in enumerate(contents, 1):
        pkg = tmp_path / f"{prefix}{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "data" / "part.bin").write_bytes(data)
        (pkg / "__init__.py").write_text(
            textwrap.dedent("""
            import os
            def get_part_path():
                return os.path.join(os.path.dirname(__file__), "data", "part.bin")
        """)
        )
    monkeypatch.syspath_prepend(str(tmp_path))


def test_gguf_is_assembled_verified_and_reused(tmp_path, monkeypatch):
    import hashlib

    _fake_parts(tmp_path / "pkgs", monkeypatch, [b"GGUF", b"-body"], "tiny_gguf_ok_part")
    model = GGUFModel("tiny", "tiny_gguf_ok_part", "tiny-gguf-ok-part", 2, 9, hashlib.sha256(b"GGUF-body").hexdigest())
    monkeypatch.setitem(MODELS, "tiny", model)
    path = ensure_gguf("tiny", tmp_path / "models")
    assert path.read_bytes() == b"GGUF-body"
    assert ensure_gguf("tiny", tmp_path / "models") == path


def test_missing_gguf_part_names_the_package(tmp_path, monkeypatch):
    model = GGUFModel("gone", "no_such_gguf_part", "no-such-gguf-part", 3, 10, "0" * 64)
    monkeypatch.setitem(MODELS, "gone", model)
    with pytest.raises(ModelFileError, match="'no-such-gguf-part1' is not installed"):
        ensure_gguf("gone", tmp_path)


def test_corrupt_gguf_part_is_rejected_and_nothing_is_cached(tmp_path, monkeypatch):
    import hashlib

    _fake_parts(tmp_path / "pkgs", monkeypatch, [b"GGUF", b"-bodY"], "tiny_gguf_bad_part")
    model = GGUFModel("bad", "tiny_gguf_bad_part", "tiny-gguf-bad-part", 2, 9, hashlib.sha256(b"GGUF-body").hexdigest())
    monkeypatch.setitem(MODELS, "bad", model)
    with pytest.raises(ModelFileError, match="corrupt"):
        ensure_gguf("bad", tmp_path / "models")
    assert not any((tmp_path / "models").iterdir())


def test_the_local_client_sends_max_tokens_which_llama_cpp_reads():
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    from agent.llm.openai_client import LlamaCppChat

    local = LlamaCppChat(base_url="http://127.0.0.1:1/v1", api_key="x", model="local")
    payload = local._get_request_payload([HumanMessage("hi")], max_tokens=300)
    assert payload["max_tokens"] == 300 and "max_completion_tokens" not in payload
    plain = ChatOpenAI(base_url="http://127.0.0.1:1/v1", api_key="x", model="m")._get_request_payload(
        [HumanMessage("hi")], max_tokens=300
    )
    assert plain["max_completion_tokens"] == 300  # what llama.cpp ignores


@pytest.mark.parametrize(
    ("status", "message", "error", "fragment"),
    [(400, "This model's maximum context length is 4096 tokens. However, you requested 7625 tokens", LLMError, "raise AMBIGQA_LOCAL_CTX"),
     (401, "Incorrect API key provided", LLMUnavailableError, r"refused the request \(401\): Incorrect API key provided$")],
)  # fmt: skip
def test_a_refused_request_is_a_clear_error(chat_endpoint, status, message, error, fragment):
    from langchain_openai import ChatOpenAI

    from agent.llm.factory import register_model, unregister_model

    url, reply = chat_endpoint
    reply.update(status=status, body={"error": {"message": message, "type": "invalid_request_error"}})
    register_model("refusing", ChatOpenAI(base_url=url, api_key="x", model="m", max_retries=0, timeout=5))
    try:
        with pytest.raises(error, match=fragment) as caught:
            ask("closed_book", LLMOptions(llm="refusing"), parse=parse_yes_no, question="q", examples="")
        assert "prompt 'closed_book'" in str(caught.value) or status == 401
        assert (
            status == 401 or type(caught.value) is ContextOverflowError
        )  # one request refused: the eval records it, goes on
    finally:
        unregister_model("refusing")


def test_a_constrained_reply_cut_at_max_tokens_is_retried_then_falls_back(chat_endpoint):
    from langchain_openai import ChatOpenAI

    from agent.llm.factory import register_model, unregister_model
    from agent.schemas import YesNo

    url, reply = chat_endpoint  # the OpenAI client raises LengthFinishReasonError on a cut constrained reply
    reply["body"]["choices"][0] |= {"finish_reason": "length", "message": {"role": "assistant", "content": '{"ans'}}
    register_model("openai", ChatOpenAI(base_url=url, api_key="x", model="m", max_retries=0, timeout=5))
    try:
        options = LLMOptions(llm="openai", retries=1)
        call = {"parse": parse_yes_no, "schema": YesNo, "context": "", "evidence": "", "interpretation": "q"}
        got = ask("verify", options, fallback=False, **call)
        assert got.value is False and not got.parsed and got.attempts == 2  # retried, then the documented fallback
        assert got.usage.calls == 2 and got.usage.input_tokens == 20 and got.text == '{"ans'
        with pytest.raises(OutputError, match="no usable output after 2 attempts"):
            ask("verify", options, **call)
        awaited = asyncio.run(aask("verify", options, fallback=False, **call))
        assert not awaited.parsed and awaited.attempts == 2
    finally:
        unregister_model("openai")


def test_a_hung_endpoint_fails_fast_with_a_clear_error(collection, monkeypatch):
    import socket
    import threading
    import time

    import agent
    from agent.errors import LLMError
    from agent.llm.factory import unregister_model
    from agent.settings import Settings, get_settings

    defaults = Settings()
    worst = (defaults.reply_timeout(local=False) + defaults.llm_connect_timeout) * (defaults.llm_max_retries + 1)
    assert worst < 60  # a dead remote endpoint fails within a minute by default
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held = []
    threading.Thread(target=lambda: [held.append(server.accept()) for _ in range(4)], daemon=True).start()
    monkeypatch.setenv("AMBIGQA_OPENAI_BASE_URL", f"http://127.0.0.1:{server.getsockname()[1]}/v1")
    monkeypatch.setenv("AMBIGQA_OPENAI_API_KEY", "x")
    monkeypatch.setenv("AMBIGQA_LLM_TIMEOUT", "1")
    get_settings.cache_clear()
    unregister_model("openai")
    try:
        started = time.monotonic()
        with pytest.raises(LLMError) as caught:
            agent.run("When did the Harry Potter film come out?", method="closed_book", llm="openai",
                      collection=collection)  # fmt: skip
        assert time.monotonic() - started < 10 and len(str(caught.value).splitlines()) == 1
    finally:
        unregister_model("openai")
        get_settings.cache_clear()
        server.close()


def test_cached_prompt_tokens_are_read_from_either_usage_report():
    from langchain_core.messages import AIMessage

    from agent.llm.usage import call_usage

    openai_style = AIMessage(
        "x",
        usage_metadata={
            "input_tokens": 100,
            "output_tokens": 5,
            "total_tokens": 105,
            "input_token_details": {"cache_read": 60},
        },
    )
    usage = call_usage(openai_style, 1.0)
    assert (usage.input_tokens, usage.cached_tokens, usage.prefilled_tokens) == (100, 60, 40)
    raw = AIMessage(
        "x",
        response_metadata={
            "token_usage": {"prompt_tokens": 80, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 50}}
        },
    )
    assert call_usage(raw, 1.0).prefilled_tokens == 30
    silent = AIMessage("x", usage_metadata={"input_tokens": 70, "output_tokens": 1, "total_tokens": 71})
    assert call_usage(silent, 1.0).prefilled_tokens == 70  # no report: every prompt token counts as prefilled
    assert (usage + call_usage(silent, 1.0)).prefilled_tokens == 110


LLAMA_CPP_REFUSAL = {  # a FastAPI-validated server refusing a json_schema response format (older llama-cpp-python)
    "detail": [
        {
            "type": "literal_error",
            "loc": ["body", "response_format", "type"],
            "msg": "Input should be 'text' or 'json_object'",
            "input": "json_schema",
        }
    ]
}


def _format_refusing_endpoint(refused: set[str]):
    """An endpoint that refuses the response-format types in ``refused`` (a 422, as a FastAPI-validated server gives)
    and answers every other request with a verdict; it records the format each request carried."""
    from tests.conftest import completion, start_chat_endpoint

    seen: list[str | None] = []

    def respond(request):
        kind = (request.get("response_format") or {}).get("type")
        seen.append(kind)
        if kind in refused:
            return 422, LLAMA_CPP_REFUSAL
        return 200, completion('{"answer": "yes"}')

    url, server = start_chat_endpoint(respond)
    return url, server, seen


@pytest.mark.parametrize(
    "refused, first, then",
    [({"json_schema"}, ["json_schema", "json_object"], ["json_object"]),  # a server that knows only json_object
     ({"json_schema", "json_object"}, ["json_schema", "json_object", None], [None])],  # neither: the prompt's hint
)  # fmt: skip
def test_an_endpoint_that_refuses_a_json_schema_gets_the_next_form_and_is_remembered(refused, first, then):
    from langchain_openai import ChatOpenAI

    from agent.llm.factory import register_model, unregister_model
    from agent.schemas import YesNo

    url, server, seen = _format_refusing_endpoint(refused)
    register_model("openai", ChatOpenAI(base_url=url, api_key="x", model=f"m-{len(refused)}", max_retries=0))
    call = {"parse": parse_yes_no, "schema": YesNo, "context": "", "evidence": "", "interpretation": "q"}
    try:
        got = ask("verify", LLMOptions(llm="openai"), **call)
        assert got.value is True and got.attempts == 1 and got.usage.calls == 1  # a refused format is no attempt
        assert seen == first
        seen.clear()
        assert asyncio.run(aask("verify", LLMOptions(llm="openai"), **call)).value is True
        assert seen == then  # remembered for the endpoint, on the async client too
        hint = ask("verify", LLMOptions(llm="openai"), **call).prompt[0].content
        assert "JSON schema" in hint  # the schema still reaches the model in the system prompt
    finally:
        unregister_model("openai")
        server.shutdown()


def test_a_request_refused_for_another_reason_is_not_sent_again(chat_endpoint):
    from langchain_openai import ChatOpenAI

    from agent.llm.factory import register_model, unregister_model
    from agent.schemas import YesNo

    url, reply = chat_endpoint
    reply.update(
        status=400, body={"error": {"message": "temperature must be below 2", "type": "invalid_request_error"}}
    )
    register_model("openai", ChatOpenAI(base_url=url, api_key="x", model="m-other", max_retries=0))
    call = {"parse": parse_yes_no, "schema": YesNo, "context": "", "evidence": "", "interpretation": "q"}
    try:
        with pytest.raises(LLMError, match="temperature must be below 2"):
            ask("verify", LLMOptions(llm="openai"), **call)
    finally:
        unregister_model("openai")
