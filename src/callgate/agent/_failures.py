"""How a failed model request becomes a :class:`~callgate.agent.model.ModelError`, for
every provider adapter alike.

An adapter reads its SDK's exception into a :class:`Failure` (which kind of failure,
the HTTP status, the provider's error code and text, the URL tried, the wait the
provider asked for) and describes its API once as an :class:`Api`. Everything else
is decided here:

- the text: ``<API> error <status> (<code>): <the provider's text>``,
  ``<API> request timed out``, ``could not reach the <API> (connection error)``,
  ``the <API>'s answer could not be read (...)``;
- ``retryable``: a request timeout (408), a lock timeout (409), a rate limit (429),
  any 5xx, a timeout and a connection error, the failures the official SDKs retry
  themselves; with the provider's ``Retry-After``, the text says when to try again;
- a 401 says which key to check; a 400 saying that the request does not fit the
  model's context says what to lower, unless the prompt alone filled the window
  (the conversation is too long, or the model wrote until it was full): then the
  run ran out of context, a limit as with a cut-off answer (``cut_off``);
- no secret in the text: the URL is shown without credentials, query or fragment,
  and the keys the adapter holds, and anything shaped like a provider's key or a
  bearer token, are redacted from the finished message, whichever part of it
  (URL, code, the provider's text) they came in by.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from callgate.agent.model import ModelError

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""Besides every 5xx: the statuses the Anthropic and OpenAI SDKs retry themselves."""

REDACTED = "[redacted]"

_KEY_TEXT = re.compile(
    # OpenAI's and Anthropic's keys, masked or not ("sk-abc***xyz"), Google API
    # keys, and a bearer token echoed with its header.
    r"\bsk-[A-Za-z0-9_*.-]+|\bAIza[0-9A-Za-z_-]{20,}|\b[Bb]earer\s+[^\s\"',;]+"
)


@dataclass(frozen=True, kw_only=True)
class Api:
    """An API as its errors name it, and what the mapping must know of it."""

    name: str
    """As the text names it: ``Anthropic API``, ``OpenAI-compatible server``."""
    key_variable: str | None = None
    """Where the adapter reads its key, named by the hint of a 401."""
    names_url: Literal["never", "unanswered", "always"] = "never"
    """When the text names the URL tried: never, when no answer came (a timeout, a
    connection error), or always (a server the user chose: a typo in its URL is
    the usual reason for any of its errors)."""
    auth_text_quotes_key: bool = False
    """Its 401 text quotes the key it refused (OpenAI's does, masked): the text is
    then left out, not only redacted, as a masked key is not the key itself."""


FailureKind = Literal["status", "timeout", "connection", "unreadable"]


@dataclass(frozen=True, kw_only=True)
class Failure:
    """What an adapter read off its SDK's exception (never the exception itself:
    it carries the request, headers and all)."""

    kind: FailureKind
    """``status``: an HTTP error answer; ``timeout``, ``connection``: no answer;
    ``unreadable``: an answer the SDK or the adapter could not read."""
    status: int | None = None
    code: str | None = None
    """The provider's name for the error: ``rate_limit_error``, ``RESOURCE_EXHAUSTED``."""
    detail: str | None = None
    """The provider's text (for ``unreadable``: what could not be read)."""
    url: str | None = None
    """The URL the request went to, as sent: this module strips what must not show."""
    retry_after: float | None = None
    """Seconds the provider asked to wait (see :func:`retry_after`)."""


def model_error(
    api: Api,
    failure: Failure,
    *,
    secrets: Iterable[str | None] = (),
    max_tokens: int | None = None,
) -> ModelError:
    """``failure`` as the loop sees it.

    Args:
        api: the API that failed.
        failure: what the adapter read off its SDK's exception.
        secrets: the keys and tokens the adapter sends, none of which may show.
        max_tokens: the request's output budget, which a context error names.
    """
    shown = shown_url(failure.url) if failure.url else None
    unanswered = f" at {shown}" if shown and api.names_url != "never" else ""
    status: int | None = None
    cut_off = False
    retryable = True
    if failure.kind == "timeout":
        message = f"{api.name} request{unanswered} timed out"
    elif failure.kind == "connection":
        message = f"could not reach the {api.name}{unanswered} (connection error)"
    elif failure.kind == "unreadable":
        message = f"the {api.name}'s answer could not be read ({failure.detail or 'no detail'})"
        retryable = False
    else:
        status = failure.status
        at = f" at {shown}" if shown and api.names_url == "always" else ""
        message, cut_off = _answered(api, failure, at, max_tokens)
        retryable = status is not None and (status in RETRYABLE_STATUSES or status >= 500)
    wait = failure.retry_after if retryable else None
    if wait is not None:
        message = message.rstrip(".") + f"; try again in {wait:g} s"
    return ModelError(
        redacted(message, secrets),
        retryable=retryable,
        status=status,
        cut_off=cut_off,
        retry_after=wait,
    )


def _answered(api: Api, failure: Failure, at: str, max_tokens: int | None) -> tuple[str, bool]:
    status, code, detail = failure.status, failure.code, failure.detail
    head = f"{api.name} error" + (f" {status}" if status is not None else "")
    head += (f" ({code})" if code else "") + at
    if status == 401:
        said = detail.rstrip(".") if detail and not api.auth_text_quotes_key else None
        body = f"{said or 'authentication failed'}; check the API key"
        body += f" ({api.key_variable})" if api.key_variable else ""
    else:
        body = detail or "no details"
    message = f"{head}: {body}"
    if status != 400 or not _context_exceeded(code, detail):
        return message, False
    # A prompt as long as the whole window: too long from the start, or grown while
    # the model wrote (llama-cpp-python counts a tool call written so far as prompt);
    # the error does not tell which, and no smaller output budget would have helped.
    filled = _answer_filled(detail)
    hint = _FILLED_HINT if filled else _CONTEXT_HINT.format(max_tokens=max_tokens or "?")
    return message.rstrip(".") + hint, filled


_CONTEXT_HINT = (
    ". The request does not fit the model's context window: lower the output "
    "budget ({max_tokens} tokens a request; --max-output-tokens, or "
    "RunLimits(max_tokens_per_request=...)), or start a shorter conversation "
    "or offer fewer tools"
)
_CONTEXT_WORDS = re.compile(
    # OpenAI, llama.cpp and vLLM ("maximum context length"), Anthropic ("prompt is
    # too long", "exceed context limit"), Gemini ("The input token count (...)
    # exceeds the maximum number of tokens allowed").
    r"context (length|window|size|limit)|maximum context|prompt is too long"
    r"|exceeds the maximum number of tokens",
    re.IGNORECASE,
)
_FILLED_HINT = (
    ". The prompt the server counted is the whole context window, with no room for an "
    "answer. Either the conversation and the tool definitions are longer than the "
    "window: give the server a larger context, offer fewer tools or start a shorter "
    "conversation. Or the model wrote until the window was full: the server does not "
    "hold what the model writes to the output budget (llama-cpp-python's "
    "chatml-function-calling does not, while it writes a tool call's arguments), and "
    "a small model may never close a string"
)
_WINDOW = re.compile(r"maximum context length is (\d+)")
_IN_MESSAGES = re.compile(r"(\d+) in the messages")


def _context_exceeded(code: str | None, detail: str | None) -> bool:
    """OpenAI and llama.cpp send the code ``context_length_exceeded``; the others
    only say so in their text."""
    return code == "context_length_exceeded" or bool(detail and _CONTEXT_WORDS.search(detail))


def _answer_filled(detail: str | None) -> bool:
    """Whether a context error says the prompt alone is the whole window: llama-cpp-
    python's when the conversation is longer than the window, or when the model wrote
    (a tool call's arguments) until the context ended; no smaller output budget
    would have avoided either."""
    window = _WINDOW.search(detail or "")
    prompt = _IN_MESSAGES.search(detail or "")
    return bool(window and prompt and int(prompt.group(1)) >= int(window.group(1)))


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """The wait an error answer's headers ask for, in seconds: ``retry-after-ms``
    (sent by OpenAI and Anthropic), else ``retry-after`` in seconds. The HTTP-date
    form is not read: an error's text says how long, not until when."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def shown_url(url: str) -> str:
    """``url`` without credentials, query or fragment: what an error may name."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a number: the URL is not one to show
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redacted(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` without any of ``secrets`` and without anything shaped like a key."""
    # Longest first: a secret that holds another is redacted whole.
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return _KEY_TEXT.sub(REDACTED, text)
