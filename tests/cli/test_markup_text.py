"""Text that tools, upstreams, suites and models supply is printed as written.

The terminal output uses rich, which reads "[...]" as markup: a tool's error that
said "Try [/red] again" stopped ``callgate call`` with a MarkupError traceback,
and a model's reply or a task id holding "[/]" stopped ``callgate eval run``
after all its runs. Each command here meets such text in every field it prints.
"""

from __future__ import annotations

import json
import re

from .conftest import Cli

TOOLS = '''
from callgate import Toolbox
from callgate.errors import BusinessStateError

box = Toolbox("mk", description="Tools [/] with [bold]markup[/bold].")


@box.tool(read_only=True, open_world=False)
def look(x: str) -> str:
    """Look at [/red] things [link=http://x]here[/link].

    Args:
        x: The [/] thing, e.g. "[/b]".
    """
    raise BusinessStateError("refused [/] here", next_step="Try [/red] again")
'''

SUITE = """
[suite]
name = "[bold]odd[/] $x$"

[[tasks]]
id = "a $\\\\frac{$ [/red] b"
prompt = "Look at [/]."
script = [{ call = "mk.look", args = { x = "[/]" } }, { reply = "Looked [/] at it." }]
[tasks.expect]
answer_contains = ["[/red] never said"]
"""


def _config(cli: Cli) -> str:
    (cli.tmp_path / "mk_tools.py").write_text(TOOLS, encoding="utf-8")
    path = cli.tmp_path / "mk.toml"
    path.write_text(
        'toolboxes = ["./mk_tools.py:box"]\n\n[lint.waive."mk.*"]\n'
        '"description-when" = "said [/red] elsewhere"\n',
        encoding="utf-8",
    )
    return str(path)


def test_a_tools_words_print_as_written(cli: Cli) -> None:
    config = _config(cli)

    tools = cli("-c", config, "tools")
    assert tools.exit_code == 0, tools.output
    assert "Look at [/red] things [link=http://x]here[/link]." in tools.stdout
    search = cli("-c", config, "tools", "--search", "[/] things")
    assert search.exit_code == 0, search.output
    assert "[/red]" in search.stdout

    call = cli(
        "-c", config, "call", "mk.look", "--args", '{"x": "[/]"}', "--idempotency-key", "k[/]"
    )
    assert call.exit_code == 1, call.output
    for text in ("refused [/] here", "Try [/red] again", "k[/]"):
        assert text in call.stdout
    again = cli(
        "-c", config, "call", "mk.look", "--args", '{"x": "[/]"}', "--idempotency-key", "k[/]"
    )
    assert again.exit_code == 1, again.output

    audit = cli("-c", config, "audit")
    assert audit.exit_code == 0, audit.output
    call_id = re.search(r"call_[0-9a-f]+", call.stdout)
    assert call_id is not None
    detail = cli("-c", config, "audit", "--call", call_id.group())
    assert detail.exit_code == 0, detail.output
    assert "k[/]" in detail.stdout
    lint = cli("-c", config, "lint", "--all")
    assert lint.exit_code in (0, 1), lint.output
    assert "waived (said [/red] elsewhere)" in lint.stdout


def test_an_eval_of_odd_ids_and_replies_prints_its_report_and_comparison(cli: Cli) -> None:
    config = _config(cli)
    suite = cli.tmp_path / "odd.toml"
    suite.write_text(SUITE.replace("[suite]", f'[suite]\nconfig = "{config}"'), encoding="utf-8")
    out, page = cli.tmp_path / "r.json", cli.tmp_path / "r.html"

    ran = cli("eval", "run", str(suite), "--out", str(out), "--html", str(page))

    assert ran.exit_code == 0, ran.output
    assert "[bold]odd[/] $x$" in ran.stdout
    assert "a $\\frac{$ [/red] b" in ran.stdout
    assert "the answer does not contain '[/red] never said'" in ran.stdout
    assert "a $\\frac{$ [/red] b" in page.read_text(encoding="utf-8")  # in the table
    compared = cli("eval", "compare", str(out), str(out))
    assert compared.exit_code == 0, compared.output
    assert "a $\\frac{$ [/red] b" in compared.stdout
    assert json.loads(out.read_text(encoding="utf-8"))["suite"] == "[bold]odd[/] $x$"
