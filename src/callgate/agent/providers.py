"""Models by provider name: what ``callgate run --provider`` builds.

Each adapter lives in its own module and imports its provider's official SDK (an
optional extra), so nothing here imports an SDK until that provider is asked for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from callgate.errors import UserError

if TYPE_CHECKING:
    from callgate.agent.model import Model

__all__ = [
    "PROVIDERS",
    "MissingCredentials",
    "Provider",
    "keepable_url",
    "make_model",
    "provider_of",
]


class MissingCredentials(UserError, ValueError):
    """The provider needs an API key and none is configured; the message says which
    environment variable to set."""


@dataclass(frozen=True)
class Provider:
    """One way to reach models: its adapter, its extra, and the key it needs."""

    name: str
    module: str
    cls: str
    extra: str
    key_env: tuple[str, ...]
    """Environment variables that may hold the key (the first is the one to set)."""
    needs_key: bool = True


PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider(
            "anthropic",
            "callgate.agent.anthropic",
            "AnthropicModel",
            "anthropic",
            ("ANTHROPIC_API_KEY",),
        ),
        Provider(
            "openai", "callgate.agent.openai_chat", "OpenAIChatModel", "openai", ("OPENAI_API_KEY",)
        ),
        Provider(
            "openai-responses",
            "callgate.agent.openai_responses",
            "OpenAIResponsesModel",
            "openai",
            ("OPENAI_API_KEY",),
        ),
        Provider(
            "gemini",
            "callgate.agent.gemini",
            "GeminiModel",
            "gemini",
            ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        ),
        # Local servers (vLLM, llama.cpp, Ollama) usually take no key. Never the OpenAI
        # key: it would go to whatever --base-url names.
        Provider(
            "openai-compatible",
            "callgate.agent.openai_chat",
            "OpenAIChatModel",
            "openai",
            ("CALLGATE_COMPATIBLE_API_KEY",),
            needs_key=False,
        ),
    )
}


def provider_of(model_name: str) -> tuple[str, str] | None:
    """(provider, model) of a model named as adapters name themselves
    (``openai-compatible:smollm2``), or None if no provider builds it.

    A Responses model at another server names itself
    ``openai-compatible-responses``: ``openai-responses`` with that base URL
    builds it again.
    """
    prefix, _, model = model_name.partition(":")
    prefix = {"openai-compatible-responses": "openai-responses"}.get(prefix, prefix)
    if prefix not in PROVIDERS or not model:
        return None
    return prefix, model


def keepable_url(base_url: str | None) -> str | None:
    """``base_url`` if it can be kept with a run for its resume, else None: a URL
    with credentials, a query or a fragment may hold a secret and is never stored
    (the resume then needs ``--base-url`` again)."""
    if not base_url:
        return None
    parts = urlsplit(base_url)
    if parts.username or parts.password or parts.query or parts.fragment:
        return None
    return base_url


def make_model(provider: str, model: str, *, base_url: str | None = None) -> Model:
    """The model ``model`` of ``provider`` (see :data:`PROVIDERS`).

    Raises:
        ValueError: an unknown provider, or ``openai-compatible`` without a base URL.
        MissingCredentials: no API key in the environment.
        ImportError: the provider's SDK is not installed (the message names the extra).
    """
    found = PROVIDERS.get(provider)
    if found is None:
        raise ValueError(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")
    if provider == "openai-compatible" and not base_url:
        raise ValueError(
            "--provider openai-compatible needs --base-url, e.g. http://127.0.0.1:11434/v1"
        )
    key = next((os.environ[name] for name in found.key_env if os.environ.get(name)), None)
    if found.needs_key and key is None:
        raise MissingCredentials(
            f"no API key for {provider}: set the environment variable {found.key_env[0]}"
        )
    import importlib

    try:
        module = importlib.import_module(found.module)
    except ImportError as exc:
        raise ImportError(
            f"{provider} needs its SDK: pip install 'callgate[{found.extra}]' ({exc})"
        ) from exc
    factory = getattr(module, found.cls)
    if provider == "openai-compatible":
        # Said outright: the wire forms compatible servers read, whatever the URL.
        compatible: Model = factory(model, api_key=key, base_url=base_url, compatible=True)
        return compatible
    built: Model = factory(model, api_key=key, base_url=base_url)
    return built
