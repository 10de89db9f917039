"""Reading the README's code blocks, and running its shell blocks the way a user pastes them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", flags=re.S | re.M)


@dataclass(frozen=True)
class Block:
    section: str
    lang: str
    text: str
    before: str
    """The prose between the previous block (or the heading) and this one."""


def blocks() -> list[Block]:
    """Every fenced block of the README, with its ``## `` section."""
    found: list[Block] = []
    for part in re.split(r"^## ", README.read_text(), flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        last = 0
        for match in _FENCE.finditer(body):
            found.append(Block(title.strip(), match[1], match[2], body[last : match.start()]))
            last = match.end()
    return found


def block(section: str, lang: str, index: int = 0) -> Block:
    return [b for b in blocks() if b.section == section and b.lang == lang][index]


def commands(text: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comment lines left out."""
    joined = text.replace("\\\n", " ")
    return [
        line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


@dataclass(frozen=True)
class Step:
    command: str
    exit_code: int
    stdout: str
    stderr: str


def callgate_bin() -> Path:
    """The directory ``source .venv/bin/activate`` puts on PATH: the one with ``callgate``."""
    return Path(sys.executable).parent


def run_shell(lines: list[str], cwd: Path, env: dict[str, str]) -> list[Step]:
    """Run ``lines`` in one bash, as pasted into a terminal (variables carry over, a
    failing command does not stop the rest), and split what each one printed."""
    script = []
    for index, line in enumerate(lines):
        script += [
            f"echo '@@{index}'; echo '@@{index}' >&2",
            line,
            'echo "@@exit $?"',
        ]
    path = {"PATH": f"{callgate_bin()}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **path, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    outs = re.split(r"^@@\d+\n", done.stdout, flags=re.M)[1:]
    errs = re.split(r"^@@\d+\n", done.stderr, flags=re.M)[1:]
    assert len(outs) == len(lines), done.stdout + done.stderr
    steps = []
    for line, out, err in zip(lines, outs, errs, strict=True):
        body, _, code = out.rpartition("@@exit ")
        steps.append(Step(line, int(code.strip()), body, err))
    return steps
