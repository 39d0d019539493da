"""Runs a tracer can filter: named after the method, tagged, and described by metadata (agent.tracing)."""

from langchain_core.callbacks import BaseCallbackHandler

import agent
from agent.tracing import package_version

QUESTION = "When did the Harry Potter film come out?"


class Roots(BaseCallbackHandler):
    """The chain runs that start without a parent: what a tracer shows as the run."""

    def __init__(self) -> None:
        self.roots: list[dict] = []

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, tags=None, metadata=None, **kwargs):
        if parent_run_id is None:
            self.roots.append({"name": kwargs.get("name"), "tags": tags, "metadata": metadata})


def test_a_run_is_named_after_its_method_and_carries_its_options_and_version(collection):
    handler = Roots()
    agent.run(QUESTION, method="rag", llm="fake", collection=collection, top_k=3, callbacks=[handler])
    (root,) = handler.roots
    assert root["name"] == "rag" and {"ambigqa", "method:rag"} <= set(root["tags"])
    metadata = root["metadata"]
    assert metadata["ambigqa_method"] == "rag" and metadata["ambigqa_collection"] == collection
    assert metadata["ambigqa_llm"] == "fake" and metadata["ambigqa_run_options"] == {"top_k": 3}
    assert metadata["ambigqa_version"] == package_version() != ""


def test_given_passages_are_named_not_copied_into_the_metadata(collection):
    handler = Roots()
    passages = ["The film premiered in London on 4 November 2001."]
    agent.run(QUESTION, method="rag", llm="fake", passages=passages, callbacks=[handler])
    metadata = handler.roots[0]["metadata"]
    assert metadata["ambigqa_collection"] == "(given passages)" and "passages" not in metadata["ambigqa_run_options"]
