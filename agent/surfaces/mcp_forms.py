"""MCP elicitation for ``clarify``: the user picks a thread's interpretations in a form the MCP client shows."""

from typing import TYPE_CHECKING, Any

from agent.errors import AgentError

if TYPE_CHECKING:
    from agent.threads import ClarifyResult


class PicksForm:
    """MCP elicitation for a clarify thread: a form with one checkbox per interpretation (none ticked: all), asked
    through the client where it declares elicitation. Under MCP 2026-07-28 the tool returns the form as an
    ``InputRequiredResult`` and the client calls again with the user's reply and the waiting thread as
    ``request_state``; earlier versions send the form as a request mid-call. A declined or cancelled form, a client
    without elicitation or one that refuses the request leave the thread waiting for ``resume``."""

    KEY = "interpretations"

    def __init__(self, waiting: "ClarifyResult", reply: Any = None):
        self.waiting, self.reply = waiting, reply

    @classmethod
    def answered(cls, ctx: Any) -> "PicksForm | None":
        """The form of an earlier round with the client's reply to it, or None on a first call."""
        from pydantic import ValidationError

        from agent.threads import ClarifyResult

        if ctx is None or not ctx.request_state:
            return None
        try:
            waiting = ClarifyResult.model_validate_json(ctx.request_state)
        except ValidationError as exc:
            raise AgentError("request_state is not one this server sent: call clarify again") from exc
        return cls(waiting, (ctx.input_responses or {}).get(cls.KEY))

    @property
    def numbers(self) -> list[str]:
        return [str(n) for n in range(1, len(self.waiting.interpretations) + 1)]

    def can_ask(self, ctx: Any) -> bool:
        from mcp_types import ClientCapabilities, ElicitationCapability

        return (
            ctx is not None
            and self.waiting.status == "needs_choice"
            and bool(self.waiting.interpretations)
            and ctx.session.check_client_capability(ClientCapabilities(elicitation=ElicitationCapability()))
        )

    def params(self) -> Any:
        from mcp_types import ElicitRequestFormParams

        choices = [
            {"const": n, "title": text} for n, text in zip(self.numbers, self.waiting.interpretations, strict=True)
        ]
        picks = {
            "type": "array",
            "title": "Interpretations to answer",
            "description": "tick the ones you mean; none: all of them",
            "items": {"anyOf": choices},
        }
        return ElicitRequestFormParams(
            message=f"Which of these does “{self.waiting.question}” mean?",
            requested_schema={"type": "object", "properties": {"picks": picks}},
        )

    @staticmethod
    def asked_by_retry(ctx: Any) -> bool:
        from mcp_types.version import is_version_at_least

        return ctx.protocol_version is not None and is_version_at_least(ctx.protocol_version, "2026-07-28")

    def input_required(self) -> Any:
        from mcp_types import ElicitRequest, InputRequiredResult

        return InputRequiredResult(
            input_requests={self.KEY: ElicitRequest(params=self.params())},
            request_state=self.waiting.model_dump_json(),
        )

    async def ask_now(self, ctx: Any) -> Any:
        """The client's reply to the form sent mid-call; None where it refused the request or cannot be reached."""
        from mcp.shared.exceptions import MCPError

        params = self.params()
        try:
            return await ctx.session.elicit_form(
                message=params.message, requested_schema=params.requested_schema, related_request_id=ctx.request_id
            )
        except MCPError:
            return None

    def picks(self) -> list[int] | None:
        """The numbers the user ticked ([] for all); None where there was no accepted reply."""
        if self.reply is None or getattr(self.reply, "action", None) != "accept":
            return None
        picked = (self.reply.content or {}).get("picks", [])
        if not isinstance(picked, list) or not all(isinstance(n, str) for n in picked):
            raise AgentError(
                f"the form's answer is not a list of numbers; thread {self.waiting.thread_id} waits for resume"
            )
        unknown = sorted(set(picked) - set(self.numbers))
        if unknown:
            raise AgentError(
                f"no interpretation numbered {', '.join(unknown)}; thread {self.waiting.thread_id} waits for resume"
            )
        return [int(n) for n in picked]
