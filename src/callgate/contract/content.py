"""Content: a tool result that is not JSON data (images, audio, embedded resources, text).

A tool declares ``-> Content`` and returns e.g. ``Content(Text("Chart:"), Image(png,
"image/png"))``. In the Envelope the result stays JSON, in MCP's own block shape
(bytes as base64), so shaping, idempotency replays and the audit treat it like any
other payload::

    {"content": [{"type": "text", "text": "Chart:"},
                 {"type": "image", "data": "iVBOR...", "mimeType": "image/png"}]}

:meth:`Content.from_payload` reads that shape back; the MCP server sends such a
payload as content blocks instead of JSON text plus ``structuredContent``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "CONTENT_KEY",
    "Audio",
    "Block",
    "Content",
    "EmbeddedResource",
    "Image",
    "Text",
]

CONTENT_KEY = "content"
"""The only key of a content payload: ``{"content": [block, ...]}``."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: Any) -> bytes:
    if not isinstance(value, str):
        raise ValueError("base64 data must be a string")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"invalid base64 data: {exc}") from exc


@dataclass(frozen=True)
class Text:
    """A text block."""

    text: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True)
class Image:
    """An image block: raw bytes and their MIME type (``image/png``, ...)."""

    data: bytes
    mime_type: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "image", "data": _b64(self.data), "mimeType": self.mime_type}


@dataclass(frozen=True)
class Audio:
    """An audio block: raw bytes and their MIME type (``audio/wav``, ...)."""

    data: bytes
    mime_type: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "audio", "data": _b64(self.data), "mimeType": self.mime_type}


@dataclass(kw_only=True, frozen=True)
class EmbeddedResource:
    """A resource's contents carried inside the result: ``text`` or ``blob``, not both.

    Raises:
        ValueError: neither or both of ``text`` and ``blob`` are given.
    """

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: bytes | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.blob is None):
            raise ValueError(f"embedded resource {self.uri!r} needs exactly one of text or blob")

    def to_json(self) -> dict[str, Any]:
        resource: dict[str, Any] = {"uri": self.uri}
        if self.mime_type is not None:
            resource["mimeType"] = self.mime_type
        if self.blob is not None:
            resource["blob"] = _b64(self.blob)
        else:
            resource["text"] = self.text
        return {"type": "resource", "resource": resource}


Block: TypeAlias = Text | Image | Audio | EmbeddedResource
"""One block of :class:`Content`."""


def _str(block: Mapping[str, Any], key: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise ValueError(f"a {block.get('type')!r} block needs a string {key!r}")
    return value


def _block(value: Any) -> Block:
    if not isinstance(value, Mapping):
        raise ValueError("a content block must be an object")
    kind = value.get("type")
    if kind == "text":
        return Text(_str(value, "text"))
    if kind == "image":
        return Image(_unb64(value.get("data")), _str(value, "mimeType"))
    if kind == "audio":
        return Audio(_unb64(value.get("data")), _str(value, "mimeType"))
    if kind == "resource":
        resource = value.get("resource")
        if not isinstance(resource, Mapping):
            raise ValueError("a resource block needs a 'resource' object")
        mime = resource.get("mimeType")
        return EmbeddedResource(
            uri=_str(resource, "uri"),
            mime_type=mime if isinstance(mime, str) else None,
            text=_str(resource, "text") if "text" in resource else None,
            blob=_unb64(resource["blob"]) if "blob" in resource else None,
        )
    raise ValueError(f"unknown content block type {kind!r}")


class Content:
    """What a tool returns when its result is content, not JSON data.

    Strings are taken as text blocks: ``Content("Here it is:", Image(png, "image/png"))``.
    """

    __slots__ = ("blocks",)

    blocks: tuple[Block, ...]

    def __init__(self, *blocks: Block | str) -> None:
        self.blocks = tuple(Text(b) if isinstance(b, str) else b for b in blocks)

    @classmethod
    def of(cls, blocks: Iterable[Block | str]) -> Content:
        return cls(*blocks)

    def __iter__(self) -> Iterator[Block]:
        return iter(self.blocks)

    def __len__(self) -> int:
        return len(self.blocks)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Content) and other.blocks == self.blocks

    def __hash__(self) -> int:
        return hash(self.blocks)

    def __repr__(self) -> str:
        return f"Content{self.blocks!r}"

    def to_payload(self) -> dict[str, Any]:
        """The JSON form kept in the Envelope (see the module docs)."""
        return {CONTENT_KEY: [block.to_json() for block in self.blocks]}

    @classmethod
    def from_payload(cls, payload: Any) -> Content | None:
        """The Content a payload holds, or None when it is not a content payload.

        A content payload is an object whose only key is ``content``, a list of
        valid blocks. A truncated one (some blocks left out) still is one.
        """
        if not isinstance(payload, Mapping) or set(payload) != {CONTENT_KEY}:
            return None
        blocks = payload[CONTENT_KEY]
        if not isinstance(blocks, list):
            return None
        try:
            return cls(*(_block(block) for block in blocks))
        except ValueError:
            return None
