"""A checkpoint gives back every model a method's state holds as that model, not a bare dict (a replay from a late
node, or a thread resumed on the server, reads them back)."""

import logging

from agent.answer_step import AnswerReview, Draft
from agent.savers import checkpoint_serde
from agent.schemas import Disambiguation
from agent.steps.conflict import Conflict


def test_state_models_outside_the_graph_modules_come_back_as_themselves(caplog):
    state = {
        "conflicts": [Conflict(question="When?", answers=["1963", "1998"], kept=["1963"], dropped_ids=["d1"])],
        "drafts": [Draft(text="It was 1963 [1].", reply="It was 1963 [1].", failed={"narrates": "x"})],
        "answer_review": AnswerReview(checks=["narrates"], fired=["narrates"], revisions=1),
        "disambiguations": [Disambiguation(question="When?", answer="1963", passage_ids=["d0"])],
    }
    serde = checkpoint_serde()
    with caplog.at_level(logging.WARNING):
        back = serde.loads_typed(serde.dumps_typed(state))
    assert back == state and type(back["conflicts"][0]) is Conflict and type(back["drafts"][0]) is Draft
    assert "Blocked deserialization" not in caplog.text
