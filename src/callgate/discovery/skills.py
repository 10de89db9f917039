"""Agent Skills: instructions, references and tool lists loaded when a task needs them.

A skill is a folder holding ``SKILL.md``: YAML front matter between two ``---``
lines, then instructions in Markdown. Any other file in the folder (e.g.
``references/checklist.md``, ``scripts/check.py``, ``assets/logo.png``) is part
of the skill and read on demand::

    release-rollback/
    ├── SKILL.md
    └── references/
        └── checklist.md

The front matter follows the Agent Skills format:

- ``name`` (required): 1-64 lowercase letters, digits and hyphens, no hyphen
  at either end or twice in a row, the same as the folder's name;
- ``description`` (required): 1-1024 characters saying what the skill does and
  when to use it (this is what a model sees before it loads the skill);
- ``license``, ``compatibility`` (at most 500 characters): optional strings;
- ``metadata``: optional, a map of strings to strings;
- ``allowed-tools``: optional, the tools the skill uses, as full callgate names
  (``ops.deploy_status``), space-separated (a YAML list is accepted too).

Other keys are ignored, so skills written for other hosts load; a key that is
a misspelling of a known one (``allowed_tools``) is an error rather than a
skill silently without its tools.

Loading a skill reads ``SKILL.md`` and lists the folder; it never runs the
skill's scripts. :meth:`Skill.read` reads one listed file and nothing else: not
outside the folder (``..``, absolute paths, symlinks leading out), not hidden
files, not a file added after loading.

Example:
    skills = load_skills(["~/.callgate/skills", DEMO_SKILLS])
    skill = skills["release-rollback"]
    print(skill.instructions, skill.tools, skill.files)
    checklist = skill.read("references/checklist.md").text
"""

from __future__ import annotations

import base64
import hashlib
import mimetypes
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

import yaml

from callgate.contract import Toolbox
from callgate.contract.resources import ResourceContents, ResourceSpec, prompt_from_function
from callgate.errors import InvalidArgument, UserError

__all__ = [
    "MAX_DESCRIPTION_LENGTH",
    "MAX_FILES",
    "MAX_NAME_LENGTH",
    "SKILL_FILE",
    "Skill",
    "SkillError",
    "SkillFile",
    "SkillFileError",
    "load_skill",
    "load_skills",
    "skills_toolbox",
]

SKILL_FILE = "SKILL.md"
MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
MAX_COMPATIBILITY_LENGTH = 500
MAX_FILES = 1000
"""More files than this in one skill folder is a mistake (a checked-in
``node_modules``, a data dump): loading refuses rather than list them all."""

RESOURCE_MAX_BYTES = 16 * 1024 * 1024
"""The most of one file a ``skill://`` resource read returns."""

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_KNOWN_KEYS = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
)
_SKIPPED_DIRS = frozenset({"__pycache__"})
_LISTED_IN_ERRORS = 20
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_BINARY", 0)
)
_MIME_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
}


class SkillError(UserError, ValueError):
    """A skill that cannot be loaded: a bad ``SKILL.md``, a name that breaks the
    rules, two skills of one name, a skills folder that does not exist. The
    message names the file and what to change."""


class SkillFileError(SkillError):
    """A read of a file a skill does not have (outside its folder, a folder,
    missing, hidden, not listed). The message is fit for a model: what is wrong
    and which paths to use instead; ``skill`` and ``path`` say what was asked."""

    def __init__(self, message: str, *, skill: str, path: str) -> None:
        super().__init__(message)
        self.skill = skill
        self.path = path


@dataclass(frozen=True, kw_only=True)
class SkillFile:
    """One file of a skill as read: ``text`` for UTF-8 text, else ``data_base64``.

    ``size`` is the whole file's size in bytes; ``truncated`` says only the first
    ``max_bytes`` of it were read.
    """

    path: str
    text: str | None
    data_base64: str | None
    size: int
    truncated: bool
    mime_type: str


@dataclass(frozen=True, kw_only=True)
class Skill:
    """A loaded skill (see the module docs for the format)."""

    name: str
    description: str
    root: Path
    """The skill's folder, resolved."""
    instructions: str
    """The Markdown below the front matter, stripped."""
    tools: tuple[str, ...] = ()
    """The tools named by ``allowed-tools``, as written, without repeats."""
    files: tuple[str, ...] = ()
    """Every other file of the skill: relative POSIX paths, sorted; ``SKILL.md``,
    hidden files and folders, ``__pycache__`` and symlinks leading out are left out."""
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    digest: str = ""
    """sha256 of ``SKILL.md``'s bytes and the files' paths: changes when the
    instructions or the set of files change (a key for caches of the skill)."""

    def read(self, path: str, *, max_bytes: int = 256_000) -> SkillFile:
        """Read one of the skill's files: ``SKILL.md`` or one of :attr:`files`.

        Args:
            path: The file's path relative to the skill's folder, as listed in
                :attr:`files` (``references/checklist.md``).
            max_bytes: The most bytes returned; a longer file comes back cut,
                with ``truncated`` set.

        Returns:
            The file: its text when it is UTF-8, else its bytes in base64.

        Raises:
            SkillFileError: the path is absolute, climbs out with ``..``, names a
                folder, a file that is not listed, or one that no longer is in
                the folder; the message lists the files there are.
            InvalidArgument: ``max_bytes`` is not positive.
        """
        if max_bytes < 1:
            raise InvalidArgument(f"max_bytes must be positive, not {max_bytes}")
        relative = self._checked(path)
        target = self.root.joinpath(*PurePosixPath(relative).parts).resolve()
        if not target.is_relative_to(self.root):
            # The symlink was changed after loading to lead out: look missing.
            raise self._missing(path)
        try:
            # O_NOFOLLOW: the resolved path must not have become a symlink since;
            # O_NONBLOCK: nor a FIFO that would hang the open.
            fd = os.open(target, _OPEN_FLAGS)
        except OSError as exc:
            raise self._missing(path) from exc
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise self._missing(path)
            data = handle.read(max_bytes + 1)
        truncated = len(data) > max_bytes or info.st_size > max_bytes
        data = data[:max_bytes]
        text = _as_text(data, cut=truncated)
        return SkillFile(
            path=relative,
            text=text,
            data_base64=None if text is not None else base64.b64encode(data).decode("ascii"),
            size=max(info.st_size, len(data)),
            truncated=truncated,
            mime_type=_mime_type(relative, is_text=text is not None),
        )

    def _checked(self, path: str) -> str:
        """``path`` normalized (``./a`` is ``a``), if it is one the skill lists."""
        if not path or "\\" in path or "\0" in path:
            raise self._refused(path, "is not a relative path with '/' between its parts")
        pure = PurePosixPath(path)
        if pure.is_absolute() or re.match(r"[A-Za-z]:/", path):
            raise self._refused(path, "is absolute; paths are relative to the skill's folder")
        if ".." in pure.parts:
            raise self._refused(path, "leaves the skill's folder ('..')")
        relative = pure.as_posix()
        if relative == SKILL_FILE or relative in self.files:
            return relative
        if relative == ".":
            inside = list(self.files)
        else:
            inside = [f for f in self.files if f.startswith(f"{relative}/")]
        if relative == "." or inside:
            shown = ", ".join(inside[:_LISTED_IN_ERRORS]) or SKILL_FILE
            raise self._refused(path, f"is a folder, not a file; its files are: {shown}")
        raise self._missing(path)

    def _missing(self, path: str) -> SkillFileError:
        return self._refused(path, "is not one of its files")

    def _refused(self, path: str, why: str) -> SkillFileError:
        listed = [SKILL_FILE, *self.files]
        shown = ", ".join(listed[:_LISTED_IN_ERRORS])
        more = (
            f" and {len(listed) - _LISTED_IN_ERRORS} more"
            if len(listed) > _LISTED_IN_ERRORS
            else ""
        )
        return SkillFileError(
            f"Cannot read {path!r} of the skill {self.name!r}: it {why}. Use one of the "
            f"paths load_skill listed for {self.name!r}: {shown}{more}.",
            skill=self.name,
            path=path,
        )


def load_skill(folder: Path | str) -> Skill:
    """Load the skill in ``folder`` (the folder holding ``SKILL.md``).

    Nothing in the folder is run; only ``SKILL.md`` is read, the rest is listed.

    Raises:
        SkillError: the folder has no readable ``SKILL.md``; its front matter is
            missing, not YAML or breaks a rule of the format; or the folder holds
            more than :data:`MAX_FILES` files.
    """
    given = Path(os.path.abspath(Path(folder).expanduser()))
    source = given / SKILL_FILE
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise SkillError(f"{source}: cannot read the skill file ({exc.strerror or exc})") from exc
    try:
        content = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SkillError(f"{source}: not UTF-8 text (byte {exc.start})") from exc
    fields, body = _front_matter(content, source)
    name = _name(fields, given.name, source)
    root = given.resolve()
    files = _list_files(root, source)
    digest = hashlib.sha256()
    digest.update(len(raw).to_bytes(8, "big") + raw)
    for path in files:
        digest.update(path.encode("utf-8") + b"\0")
    return Skill(
        name=name,
        description=_description(fields, source),
        root=root,
        instructions=body.strip(),
        tools=_tools(fields.get("allowed-tools"), source),
        files=files,
        license=_optional_text(fields, "license", source),
        compatibility=_optional_text(fields, "compatibility", source, MAX_COMPATIBILITY_LENGTH),
        metadata=_metadata(fields.get("metadata"), source),
        digest=digest.hexdigest(),
    )


def load_skills(dirs: Iterable[Path | str]) -> dict[str, Skill]:
    """Load every skill in ``dirs``, by name in name order.

    Each folder of ``dirs`` holds skill folders; one that holds ``SKILL.md``
    itself is one skill. Subfolders without ``SKILL.md`` and hidden ones are
    skipped.

    Raises:
        SkillError: a folder of ``dirs`` does not exist, a skill cannot be loaded
            (see :func:`load_skill`), or two skills have one name (both paths named).
    """
    found: dict[str, Skill] = {}
    for entry in dirs:
        where = Path(entry).expanduser()
        if not where.is_dir():
            raise SkillError(f"skills folder {str(where)!r} does not exist or is not a folder")
        if (where / SKILL_FILE).is_file():
            folders = [where]
        else:
            folders = sorted(
                child
                for child in where.iterdir()
                if not child.name.startswith(".") and (child / SKILL_FILE).is_file()
            )
        for folder in folders:
            skill = load_skill(folder)
            other = found.get(skill.name)
            if other is not None:
                raise SkillError(
                    f"two skills are named {skill.name!r}: {other.root} and {skill.root}; "
                    "remove or rename one of them"
                )
            found[skill.name] = skill
    return {name: found[name] for name in sorted(found)}


def skills_toolbox(skills: Mapping[str, Skill], *, name: str = "skills") -> Toolbox:
    """A toolbox serving ``skills`` over MCP as prompts and resources (no tools).

    For hosts that do not use callgate's meta-tools: each skill is a prompt named
    after it (its instructions, its files and its tools) and each of its files,
    ``SKILL.md`` included, a resource at ``skill://<skill>/<path>``. Reading
    them changes nothing.

    Raises:
        InvalidToolName: ``name`` cannot name a toolbox.
    """
    box = Toolbox(
        name,
        description="Skills: instructions for recurring tasks, as prompts, and their "
        "files, as skill:// resources.",
    )
    for skill in skills.values():
        box.add_prompt(
            prompt_from_function(
                _instructions_of(skill),
                toolbox=box.name,
                name=skill.name,
                description=skill.description,
            )
        )
        for path in (SKILL_FILE, *skill.files):
            box.add_resource(_file_resource(box.name, skill, path))
    return box


def skill_uri(skill: str, path: str) -> str:
    """The URI :func:`skills_toolbox` serves ``path`` of ``skill`` at."""
    return f"skill://{skill}/{quote(path, safe='/')}"


def _instructions_of(skill: Skill) -> Callable[[], str]:
    def instructions() -> str:
        files = ", ".join(skill_uri(skill.name, path) for path in skill.files) or "none"
        tools = ", ".join(skill.tools) or "none named"
        return f"{skill.instructions}\n\nFiles of this skill (resources): {files}\nTools: {tools}"

    return instructions


def _file_resource(toolbox: str, skill: Skill, path: str) -> ResourceSpec:
    uri = skill_uri(skill.name, path)

    def read() -> list[ResourceContents]:
        found = skill.read(path, max_bytes=RESOURCE_MAX_BYTES)
        if found.text is not None:
            return [ResourceContents(uri=uri, mime_type=found.mime_type, text=found.text)]
        blob = base64.b64decode(found.data_base64 or "")
        return [ResourceContents(uri=uri, mime_type=found.mime_type, blob=blob)]

    return ResourceSpec(
        uri=uri,
        name=f"{skill.name}/{path}",
        toolbox=toolbox,
        description=f"{path} of the skill {skill.name}: {skill.description}"
        if path == SKILL_FILE
        else f"{path} of the skill {skill.name}",
        mime_type=_mime_type(path, is_text=True),
        function=read,
    )


def _front_matter(content: str, source: Path) -> tuple[dict[str, Any], str]:
    lines = content.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(
            f"{source}: no front matter; the file must start with a '---' line, then "
            "'name:' and 'description:' in YAML, then a closing '---' line"
        )
    index = next((i for i, line in enumerate(lines) if i and line.strip() == "---"), 0)
    if not index:
        raise SkillError(f"{source}: the front matter has no closing '---' line")
    try:
        fields = yaml.safe_load("".join(lines[1:index]))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 2}" if where is not None else ""
        raise SkillError(f"{source}: the front matter is not valid YAML{at}: {exc}") from exc
    if not isinstance(fields, dict):
        raise SkillError(
            f"{source}: the front matter must be YAML keys and values "
            f"('name: ...', 'description: ...'), not {type(fields).__name__}"
        )
    for key in fields:
        near = str(key).lower().replace("_", "-")
        if key not in _KNOWN_KEYS and near in _KNOWN_KEYS:
            raise SkillError(f"{source}: unknown key {key!r}; did you mean {near!r}?")
    return fields, "".join(lines[index + 1 :])


def _name(fields: Mapping[str, Any], folder: str, source: Path) -> str:
    name = fields.get("name")
    if not isinstance(name, str) or not name:
        raise SkillError(f"{source}: 'name' is required, a string like {folder!r}")
    if len(name) > MAX_NAME_LENGTH or not _NAME.fullmatch(name):
        raise SkillError(
            f"{source}: name {name!r} must be 1-{MAX_NAME_LENGTH} lowercase letters, "
            "digits and hyphens, with no hyphen at either end or twice in a row"
        )
    if name != folder:
        raise SkillError(
            f"{source}: name {name!r} must be the name of its folder ({folder!r}); "
            "rename one of them"
        )
    return name


def _description(fields: Mapping[str, Any], source: Path) -> str:
    description = fields.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(
            f"{source}: 'description' is required: what the skill does and when to use it"
        )
    description = description.strip()
    if len(description) > MAX_DESCRIPTION_LENGTH:
        raise SkillError(
            f"{source}: the description has {len(description)} characters, more than "
            f"{MAX_DESCRIPTION_LENGTH}; move the detail into the instructions"
        )
    return description


def _optional_text(
    fields: Mapping[str, Any], key: str, source: Path, limit: int | None = None
) -> str | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise SkillError(f"{source}: {key!r} must be a string, not {type(value).__name__}")
    if limit is not None and len(value) > limit:
        raise SkillError(f"{source}: {key!r} has more than {limit} characters")
    return value.strip() or None


def _tools(value: Any, source: Path) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        names = value.split()
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        names = [part for item in value for part in item.split()]
    else:
        raise SkillError(
            f"{source}: 'allowed-tools' must be tool names separated by spaces "
            "('ops.deploy_status ops.deploy_rollback') or a YAML list of them"
        )
    return tuple(dict.fromkeys(names))


def _metadata(value: Any, source: Path) -> Mapping[str, str]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, dict):
        raise SkillError(f"{source}: 'metadata' must map keys to strings")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise SkillError(
                f"{source}: metadata {key!r} must be a string key with a string value; "
                f'quote it (version: "1.0")'
            )
        out[key] = item
    return MappingProxyType(out)


def _list_files(root: Path, source: Path) -> tuple[str, ...]:
    """The skill's files below ``root`` (see :attr:`Skill.files`)."""
    files: list[str] = []
    for here, dirs, names in os.walk(root):
        # Symlinked folders are not entered: what they hold inside the skill is
        # listed under its own path, and what lies outside is not the skill's.
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS]
        for name in names:
            if name.startswith("."):
                continue
            full = Path(here, name)
            relative = full.relative_to(root).as_posix()
            if relative == SKILL_FILE:
                continue
            if full.is_symlink() and not _inside(full, root):
                continue
            if not full.is_file():
                continue
            files.append(relative)
            if len(files) > MAX_FILES:
                raise SkillError(
                    f"{source}: the skill's folder holds more than {MAX_FILES} files; "
                    "keep only what the skill needs in it"
                )
    return tuple(sorted(files))


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve(strict=True).is_relative_to(root)
    except (OSError, RuntimeError):  # dangling or looping symlink
        return False


def _as_text(data: bytes, *, cut: bool) -> str | None:
    """``data`` as text when it is UTF-8 without NUL bytes; a cut file may end
    inside a character, which is dropped."""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if cut and exc.start >= len(data) - 3 and exc.reason == "unexpected end of data":
            return data[: exc.start].decode("utf-8", errors="strict")
        return None


def _mime_type(path: str, *, is_text: bool) -> str:
    suffix = PurePosixPath(path).suffix.lower()
    guessed = _MIME_TYPES.get(suffix) or mimetypes.guess_type(path, strict=False)[0]
    if guessed and (is_text or not guessed.startswith("text/")):
        return guessed
    return "text/plain" if is_text else "application/octet-stream"
