"""The one mapping from a failed model request to a ModelError: texts, flags, no secrets.

Each adapter's own tests check what it reads off its SDK's exceptions; these check
what the mapping makes of it, whichever adapter it came from.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from callgate.agent._failures import Api, Failure, FailureKind, model_error, retry_after, shown_url

KEY = "sk-live-0123456789abcdefXYZ"
TOKEN = "tok-9f8e7d6c5b4a"
GATEWAY_TOKEN = "gw-7c1e0b9a2d"  # a token the adapter does not hold, echoed with its header
API = Api(name="Example API", key_variable="EXAMPLE_KEY")
EVERY_URL = Api(name="Example server", names_url="always")


@pytest.mark.parametrize("kind", ["status", "timeout", "connection", "unreadable"])
@pytest.mark.parametrize("api", [API, EVERY_URL], ids=["never-url", "every-url"])
@pytest.mark.parametrize("status", [400, 401, 429, 500])
def test_no_secret_reaches_the_text_whatever_part_carried_it(
    kind: FailureKind, api: Api, status: int
) -> None:
    failure = Failure(
        kind=kind,
        status=status if kind == "status" else None,
        code=f"bad_key_{TOKEN}",
        # A proxy that echoes what it was sent: the key, a masked form, the header.
        detail=f"rejected {KEY} (also sk-abc***XYZ, AIzaSyA1234567890abcdefghij, "
        f"Bearer {GATEWAY_TOKEN})",
        url=f"https://user:{TOKEN}@llm.example:8443/v1/{KEY}/chat?key={TOKEN}#{TOKEN}",
    )
    error = model_error(api, failure, secrets=[KEY, TOKEN, None, ""])
    text = str(error)
    for secret in (KEY, TOKEN, "sk-abc", "AIzaSy", GATEWAY_TOKEN, TOKEN[:8], "user:"):
        assert secret not in text, (secret, text)
    says = {"status": f"error {status}", "timeout": "timed out", "connection": "could not reach"}
    assert says.get(kind, "could not be read") in text  # still says what happened


def test_the_url_is_named_without_credentials_query_or_fragment() -> None:
    failure = Failure(kind="connection", url="http://me:pw@[::1]:8080/v1/chat?x=1#y")
    assert str(model_error(EVERY_URL, failure)) == (
        "could not reach the Example server at http://[::1]:8080/v1/chat (connection error)"
    )
    assert shown_url("http://host:notaport/v1") == "http://host/v1"


@pytest.mark.parametrize(
    ("api", "kind", "says"),
    [
        (API, "timeout", "Example API request timed out"),
        (API, "connection", "could not reach the Example API (connection error)"),
        (
            Api(name="Example API", names_url="unanswered"),
            "timeout",
            "Example API request at https://llm.example/v1/chat timed out",
        ),
        (
            Api(name="Example API", names_url="unanswered"),
            "status",
            "Example API error 503: overloaded",
        ),
        (
            EVERY_URL,
            "status",
            "Example server error 503 at https://llm.example/v1/chat: overloaded",
        ),
    ],
)
def test_the_url_tried_is_named_as_the_api_says(api: Api, kind: FailureKind, says: str) -> None:
    failure = Failure(
        kind=kind,
        status=503 if kind == "status" else None,
        detail="overloaded",
        url="https://llm.example/v1/chat",
    )
    assert str(model_error(api, failure)) == says


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (408, True),
        (409, True),
        (413, False),
        (422, False),
        (429, True),
        (500, True),
        (503, True),
        (529, True),
        (None, False),
    ],
)
def test_retryable_statuses_are_the_ones_the_sdks_retry(
    status: int | None, retryable: bool
) -> None:
    error = model_error(API, Failure(kind="status", status=status, detail="x"))
    assert error.retryable is retryable and error.status == status


@pytest.mark.parametrize(
    ("kind", "retryable"),
    [("timeout", True), ("connection", True), ("unreadable", False)],
)
def test_a_request_without_an_answer_may_be_retried(kind: FailureKind, retryable: bool) -> None:
    error = model_error(API, Failure(kind=kind, detail="KeyError: 'choices'"))
    assert error.retryable is retryable and error.status is None and not error.cut_off


def test_a_401_says_which_key_to_check_and_keeps_or_leaves_out_the_providers_text() -> None:
    failure = Failure(kind="status", status=401, code="auth", detail="Key sk-ab***yz is invalid.")
    assert str(model_error(API, failure)) == (
        "Example API error 401 (auth): Key [redacted] is invalid; check the API key (EXAMPLE_KEY)"
    )
    quoting = Api(name="Example API", auth_text_quotes_key=True)
    assert str(model_error(quoting, failure)) == (
        "Example API error 401 (auth): authentication failed; check the API key"
    )


def test_a_context_error_names_the_budget_and_a_filled_window_is_a_cut_off_answer() -> None:
    too_long = Failure(kind="status", status=400, detail="prompt is too long: 9 tokens > 8.")
    error = model_error(API, too_long, max_tokens=512)
    assert str(error).startswith("Example API error 400: prompt is too long: 9 tokens > 8. The ")
    assert "lower the output budget (512 tokens a request" in str(error)
    assert not error.cut_off and not error.retryable

    filled = Failure(
        kind="status",
        status=400,
        code="context_length_exceeded",
        detail="This model's maximum context length is 2048 tokens. However, you requested "
        "2100 tokens (2048 in the messages, 52 in the completion).",
    )
    error = model_error(API, filled, max_tokens=52)
    assert error.cut_off and "is the whole context window, with no room" in str(error)
    assert "give the server a larger context" in str(error)  # the conversation is too long
    assert "the model wrote until the window was full" in str(error)  # or it wrote on
    assert "lower the output budget" not in str(error)
    # The same words in another status are not a context error.
    assert "lower the output budget" not in str(model_error(API, replace(too_long, status=413)))


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "20"}, 20.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}, None),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "inf"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_retry_after_reads_the_seconds_the_provider_asked_for(
    headers: dict[str, str] | None, seconds: float | None
) -> None:
    assert retry_after(headers) == seconds


def test_the_wait_asked_for_is_said_only_where_trying_again_may_work() -> None:
    limited = model_error(
        API, Failure(kind="status", status=429, detail="Slow down.", retry_after=20.0)
    )
    assert str(limited) == "Example API error 429: Slow down; try again in 20 s"
    assert limited.retry_after == 20.0
    refused = model_error(API, Failure(kind="status", status=400, detail="No.", retry_after=20.0))
    assert str(refused) == "Example API error 400: No." and refused.retry_after is None
