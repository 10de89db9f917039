"""Agent Skills: loading SKILL.md folders, reading their files, serving them over MCP."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from callgate import Gate, Principal
from callgate.demo import toolboxes
from callgate.demo._skills import DEMO_SKILLS
from callgate.discovery.skills import (
    Skill,
    SkillError,
    SkillFileError,
    load_skill,
    load_skills,
    skills_toolbox,
)
from callgate.errors import InvalidArgument, UserError
from callgate.mcp import build_server

GOOD = """\
---
name: release-rollback
description: Roll back a bad release safely.
license: Apache-2.0
compatibility: needs the ops toolbox
metadata:
  owner: platform
  version: "2"
allowed-tools: ops.deploy_status ops.deploy_rollback
---

# Rolling back

Check the status first.
"""

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001")


def make_skill(parent: Path, name: str = "release-rollback", text: str = GOOD) -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


def front(**fields: str) -> str:
    lines = "".join(f"{key}: {value}\n" for key, value in fields.items())
    return f"---\n{lines}---\nBody.\n"


def test_a_good_skill_file_gives_every_field(tmp_path: Path) -> None:
    skill = load_skill(make_skill(tmp_path))
    assert skill.name == "release-rollback"
    assert skill.description == "Roll back a bad release safely."
    assert skill.instructions == "# Rolling back\n\nCheck the status first."
    assert skill.tools == ("ops.deploy_status", "ops.deploy_rollback")
    assert skill.license == "Apache-2.0"
    assert skill.compatibility == "needs the ops toolbox"
    assert dict(skill.metadata) == {"owner": "platform", "version": "2"}
    assert skill.root == (tmp_path / "release-rollback").resolve()
    assert skill.files == ()
    assert re.fullmatch(r"[0-9a-f]{64}", skill.digest)


def test_optional_fields_may_be_left_out_and_tools_may_be_a_yaml_list(tmp_path: Path) -> None:
    text = "---\nname: x\ndescription: d\nallowed-tools:\n  - a.one\n  - a.two\n---\n"
    skill = load_skill(make_skill(tmp_path, "x", text))
    assert skill.tools == ("a.one", "a.two")
    assert (skill.license, skill.compatibility, dict(skill.metadata)) == (None, None, {})
    assert skill.instructions == ""


def test_keys_of_other_hosts_are_ignored(tmp_path: Path) -> None:
    skill = load_skill(make_skill(tmp_path, "x", front(name="x", description="d", model="big")))
    assert skill.name == "x"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (front(description="d"), "'name' is required"),
        (front(name="x"), "'description' is required"),
        (front(name="x", description="''"), "'description' is required"),
        (front(name="y", description="d"), "must be the name of its folder ('x')"),
        (front(name="x", description="d" * 1025), "1025 characters, more than 1024"),
        ("# Just Markdown\n", "no front matter"),
        ("---\nname: x\ndescription: d\n", "no closing '---'"),
        ("---\nname: [x\ndescription: d\n---\n", "not valid YAML"),
        ("---\n- x\n- d\n---\n", "must be YAML keys and values"),
        (front(name="x", description="d", allowed_tools="a.b"), "did you mean 'allowed-tools'"),
        (front(name="x", description="d", metadata="{version: 1.0}"), 'quote it (version: "1.0")'),
        (front(name="x", description="d", license="[1]"), "'license' must be a string"),
        (front(name="x", description="d", **{"allowed-tools": "{a: 1}"}), "'allowed-tools' must"),
    ],
)
def test_a_bad_skill_file_is_refused_saying_what_to_fix(
    tmp_path: Path, text: str, message: str
) -> None:
    folder = make_skill(tmp_path, "x", text)
    with pytest.raises(SkillError) as caught:
        load_skill(folder)
    assert message in str(caught.value)
    assert str(folder / "SKILL.md") in str(caught.value)
    assert isinstance(caught.value, UserError)


@pytest.mark.parametrize(
    "name", ["Rollback", "-rollback", "rollback-", "roll--back", "roll_back", "a" * 65]
)
def test_names_must_be_lowercase_words_joined_by_single_hyphens(tmp_path: Path, name: str) -> None:
    folder = make_skill(tmp_path, name, front(name=name, description="d"))
    with pytest.raises(SkillError, match="lowercase letters, digits and hyphens"):
        load_skill(folder)


def test_a_name_of_64_characters_with_digits_is_fine(tmp_path: Path) -> None:
    name = "a1-" * 21 + "z"
    assert load_skill(make_skill(tmp_path, name, front(name=name, description="d"))).name == name


def test_a_folder_without_skill_file_cannot_be_loaded(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match="cannot read the skill file"):
        load_skill(tmp_path)


def test_files_are_listed_sorted_without_hidden_ones_or_links_leading_out(
    tmp_path: Path,
) -> None:
    folder = make_skill(tmp_path / "skills")
    (folder / "references").mkdir()
    (folder / "references" / "checklist.md").write_text("- [ ] status read\n")
    (folder / "scripts").mkdir()
    (folder / "scripts" / "check.py").write_text("print('hi')\n")
    (folder / "scripts" / "__pycache__").mkdir()
    (folder / "scripts" / "__pycache__" / "check.cpython-311.pyc").write_bytes(b"\0")
    (folder / "assets").mkdir()
    (folder / "assets" / "logo.png").write_bytes(PNG)
    (folder / ".env").write_text("TOKEN=secret\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("[core]\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    (folder / "outside.txt").symlink_to(secret)
    (folder / "linked-out").symlink_to(tmp_path, target_is_directory=True)
    (folder / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    (folder / "alias.md").symlink_to(folder / "references" / "checklist.md")
    skill = load_skill(folder)
    assert skill.files == (
        "alias.md",
        "assets/logo.png",
        "references/checklist.md",
        "scripts/check.py",
    )


def test_loading_a_skill_never_runs_its_scripts(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    marker = tmp_path / "ran"
    (folder / "scripts").mkdir()
    (folder / "scripts" / "__init__.py").write_text(f"open({str(marker)!r}, 'w')\n")
    skill = load_skill(folder)
    skill.read("scripts/__init__.py")
    assert skill.files == ("scripts/__init__.py",)
    assert not marker.exists()


def test_the_digest_follows_the_skill_file_and_the_set_of_files(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    first = load_skill(folder).digest
    assert load_skill(folder).digest == first
    (folder / "notes.md").write_text("a")
    added = load_skill(folder).digest
    (folder / "SKILL.md").write_text(GOOD + "More.\n")
    edited = load_skill(folder).digest
    assert len({first, added, edited}) == 3


@pytest.fixture
def skill(tmp_path: Path) -> Skill:
    folder = make_skill(tmp_path / "skills")
    (folder / "references").mkdir()
    (folder / "references" / "checklist.md").write_text("# Checklist\n\n- [ ] status\n")
    (folder / "references" / "big.md").write_text("é" * 1000, encoding="utf-8")
    (folder / "assets").mkdir()
    (folder / "assets" / "logo.png").write_bytes(PNG)
    (folder / ".env").write_text("TOKEN=secret\n")
    outside = tmp_path / "secret.txt"
    outside.write_text("the launch codes")
    (folder / "escape.md").symlink_to(outside)
    (folder / "inside.md").symlink_to(folder / "references" / "checklist.md")
    return load_skill(folder)


def test_a_text_file_reads_as_text(skill: Skill) -> None:
    read = skill.read("references/checklist.md")
    assert (read.path, read.text, read.data_base64) == (
        "references/checklist.md",
        "# Checklist\n\n- [ ] status\n",
        None,
    )
    assert (read.size, read.truncated, read.mime_type) == (26, False, "text/markdown")
    assert skill.read("./inside.md").text == read.text
    assert skill.read("SKILL.md").text == GOOD


def test_a_binary_file_reads_as_base64(skill: Skill) -> None:
    read = skill.read("assets/logo.png")
    assert read.text is None
    assert read.data_base64 is not None
    assert base64.b64decode(read.data_base64) == PNG
    assert (read.size, read.mime_type) == (len(PNG), "image/png")


def test_a_long_file_is_cut_at_max_bytes_on_a_character_boundary(skill: Skill) -> None:
    read = skill.read("references/big.md", max_bytes=101)
    assert read.truncated
    assert read.size == 2000
    assert read.text == "é" * 50
    binary = skill.read("assets/logo.png", max_bytes=4)
    assert binary.truncated
    assert base64.b64decode(binary.data_base64 or "") == PNG[:4]
    with pytest.raises(InvalidArgument):
        skill.read("SKILL.md", max_bytes=0)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../secret.txt", "leaves the skill's folder"),
        ("references/../../secret.txt", "leaves the skill's folder"),
        ("/etc/passwd", "is absolute"),
        (str(Path(__file__).resolve()), "is absolute"),
        ("references", "is a folder, not a file; its files are: references/big.md"),
        ("references/missing.md", "is not one of its files"),
        ("escape.md", "is not one of its files"),
        (".env", "is not one of its files"),
        ("references\\checklist.md", "is not a relative path"),
        ("", "is not a relative path"),
    ],
)
def test_reads_never_leave_the_listed_files(skill: Skill, path: str, why: str) -> None:
    with pytest.raises(SkillFileError) as caught:
        skill.read(path)
    message = str(caught.value)
    assert why in message
    assert "the launch codes" not in message
    # Whoever asked is told what it can read instead.
    assert "Use one of the paths load_skill listed" in message
    assert "references/checklist.md" in message
    assert (caught.value.skill, caught.value.path) == ("release-rollback", path)


def test_a_symlink_changed_after_loading_to_lead_out_is_refused(
    skill: Skill, tmp_path: Path
) -> None:
    link = skill.root / "inside.md"
    link.unlink()
    link.symlink_to(tmp_path / "secret.txt")
    with pytest.raises(SkillFileError, match="is not one of its files"):
        skill.read("inside.md")


def test_a_file_deleted_after_loading_reads_as_missing(skill: Skill) -> None:
    (skill.root / "references" / "checklist.md").unlink()
    with pytest.raises(SkillFileError, match="is not one of its files"):
        skill.read("references/checklist.md")


def test_skills_load_from_several_folders_sorted_by_name(tmp_path: Path) -> None:
    make_skill(tmp_path / "a", "zeta", front(name="zeta", description="d"))
    make_skill(tmp_path / "a", "alpha", front(name="alpha", description="d"))
    (tmp_path / "a" / "not-a-skill").mkdir()
    (tmp_path / "a" / "README.md").write_text("skills live here")
    single = make_skill(tmp_path / "b", "mid", front(name="mid", description="d"))
    skills = load_skills([tmp_path / "a", str(single)])
    assert list(skills) == ["alpha", "mid", "zeta"]
    assert skills["mid"].root == single.resolve()


def test_two_skills_of_one_name_are_refused_naming_both(tmp_path: Path) -> None:
    one = make_skill(tmp_path / "team")
    two = make_skill(tmp_path / "personal")
    with pytest.raises(SkillError) as caught:
        load_skills([tmp_path / "team", tmp_path / "personal"])
    assert str(one.resolve()) in str(caught.value)
    assert str(two.resolve()) in str(caught.value)


def test_a_missing_skills_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match="does not exist"):
        load_skills([tmp_path / "nope"])


def test_the_demo_skills_name_only_tools_the_demo_has() -> None:
    skills = load_skills([DEMO_SKILLS])
    assert list(skills) == ["campaign-budget-change", "release-rollback"]
    (ops,) = toolboxes()
    demo_tools = {spec.name for spec in ops.specs}
    for skill in skills.values():
        assert skill.tools, skill.name
        assert set(skill.tools) <= demo_tools, skill.name
        # The instructions and the tool list agree both ways.
        mentioned = set(re.findall(r"\bops\.[a-z_]+", skill.instructions))
        assert mentioned == set(skill.tools), skill.name
        (reference,) = skill.files
        assert reference.startswith("references/")
        assert reference in skill.instructions
        text = skill.read(reference).text
        assert text is not None
        assert set(re.findall(r"\bops\.[a-z_]+", text)) <= set(skill.tools)


ALICE = Principal("alice", tenant="acme", scopes={"deploy:read"})


@pytest.fixture
async def client(skill: Skill) -> AsyncIterator[Client]:
    skills = {**load_skills([DEMO_SKILLS]), skill.name: skill}
    async with (
        Gate([*toolboxes(), skills_toolbox(skills)], store="memory://") as gate,
        Client(build_server(gate, principal=ALICE)) as client,
    ):
        yield client


@pytest.mark.anyio
async def test_each_skill_is_a_prompt_of_its_instructions_files_and_tools(
    client: Client, skill: Skill
) -> None:
    with anyio.fail_after(5):
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
        result = await client.get_prompt("release-rollback")
    assert {"campaign-budget-change", "release-rollback"} <= set(listed)
    assert listed["release-rollback"].description == skill.description
    (message,) = result.messages
    assert isinstance(message.content, types.TextContent)
    text = message.content.text
    assert text.startswith("# Rolling back\n\nCheck the status first.")
    assert "skill://release-rollback/references/checklist.md" in text
    assert "skill://release-rollback/assets/logo.png" in text
    assert "Tools: ops.deploy_status, ops.deploy_rollback" in text


@pytest.mark.anyio
async def test_each_file_of_a_skill_is_a_resource_reading_back_its_bytes(
    client: Client, skill: Skill
) -> None:
    with anyio.fail_after(5):
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        (checklist,) = (
            await client.read_resource("skill://release-rollback/references/checklist.md")
        ).contents
        (logo,) = (await client.read_resource("skill://release-rollback/assets/logo.png")).contents
        (demo,) = (await client.read_resource("skill://campaign-budget-change/SKILL.md")).contents
    assert "skill://release-rollback/SKILL.md" in uris
    assert not any(".env" in uri or "escape" in uri for uri in uris)
    assert isinstance(checklist, types.TextResourceContents)
    assert checklist.text == (skill.root / "references" / "checklist.md").read_text()
    assert checklist.mime_type == "text/markdown"
    assert isinstance(logo, types.BlobResourceContents)
    assert base64.b64decode(logo.blob) == PNG
    assert isinstance(demo, types.TextResourceContents)
    assert demo.text == (DEMO_SKILLS / "campaign-budget-change" / "SKILL.md").read_text()


@pytest.mark.anyio
async def test_a_file_outside_a_skill_is_no_resource(client: Client) -> None:
    with anyio.fail_after(5), pytest.raises(MCPError):
        await client.read_resource("skill://release-rollback/../secret.txt")


@pytest.mark.anyio
async def test_a_fifo_swapped_in_after_loading_is_refused_without_hanging(skill: Skill) -> None:
    target = skill.root / "references" / "checklist.md"
    target.unlink()
    os.mkfifo(target)
    # Opening a FIFO without a writer blocks: a regression fails here, not hangs.
    with anyio.fail_after(5), pytest.raises(SkillFileError, match="is not one of its files"):
        await anyio.to_thread.run_sync(
            lambda: skill.read("references/checklist.md"), abandon_on_cancel=True
        )
