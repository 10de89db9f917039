"""What an upstream sends while a call runs (progress, log messages, questions,
sampling), passed to the gateway's caller through the call's context, with the
gateway's secrets scrubbed from everything that passes."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any, TypeVar

import mcp_types as types
import pydantic

from callgate.contract import ToolContext
from callgate.contract.context import REDACTED, ClientCannot, InputRequired
from callgate.gateway.connection import Forwarding

__all__ = ["forwarding_for", "scrub"]

T = TypeVar("T")


def scrub(value: Any, secrets: frozenset[str]) -> Any:
    """``value`` (a result, a message, their JSON) with every secret replaced by
    ``[secret]``; pydantic models are scrubbed through their JSON form."""
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, pydantic.BaseModel):
        clean = scrub(value.model_dump(mode="json", by_alias=True), secrets)
        return type(value).model_validate(clean)
    if isinstance(value, dict):
        return {scrub(key, secrets): scrub(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item, secrets) for item in value]
    return value


def forwarding_for(
    ctx: ToolContext, asked: list[InputRequired], secrets: frozenset[str]
) -> Forwarding:
    """Progress, log messages, questions and sampling of the upstream, passed to the
    gateway's caller through the tool's context (secrets scrubbed)."""

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        await ctx.report_progress(progress, total, scrub(message, secrets))

    async def log(level: str, data: Any) -> None:
        text = data if isinstance(data, str) else json.dumps(data, default=str)[:4000]
        text = scrub(text, secrets)
        if level in ("debug", "info", "notice", "warning", "error", "critical", "alert"):
            await ctx.log(level, text)  # type: ignore[arg-type]
        else:
            await ctx.log("emergency", text)

    async def ask(question: Awaitable[T]) -> T | types.ErrorData:
        """The caller's answer, or the error the upstream is told instead."""
        try:
            return await question
        except ClientCannot as exc:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"callgate: {exc.message}")
        except InputRequired as exc:
            # A 2026-07-28 client answers by sending the call again: this round ends.
            asked.append(exc)
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="callgate: the question goes to the caller's client; the call is "
                "made again with the answer",
            )

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        if not isinstance(params, types.ElicitRequestFormParams):
            return types.ErrorData(
                code=types.INVALID_PARAMS,
                message="callgate forwards form elicitation only",
            )
        answer = await ask(ctx.elicit(scrub(params.message, secrets), params.requested_schema))
        if isinstance(answer, types.ErrorData):
            return answer
        return types.ElicitResult(action=answer.action, content=dict(answer.content or {}))

    async def sample(
        params: types.CreateMessageRequestParams,
    ) -> types.CreateMessageResult | types.ErrorData:
        messages = scrub(
            [m.model_dump(mode="json", by_alias=True) for m in params.messages], secrets
        )
        text = await ask(
            ctx.sample(
                messages,
                max_tokens=params.max_tokens,
                system_prompt=params.system_prompt,
                temperature=params.temperature,
            )
        )
        if isinstance(text, types.ErrorData):
            return text
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=text),
            model="callgate-client",
        )

    return Forwarding(progress=progress, log=log, elicit=elicit, sample=sample)
