"""Loading the TOML config file: good files build a working Gate, bad ones name file and key."""

from __future__ import annotations

import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from callgate import Principal
from callgate.config import ConfigError, GateConfig, default_config, load_config
from callgate.store.urls import default_store_url

pytestmark = pytest.mark.anyio

TOOLS = '''
from callgate import Toolbox, Trusted

shop = Toolbox("shop")
more = Toolbox("more")


@shop.tool(scopes=["orders:write"], idempotent=True, destructive=False, open_world=False)
def refund(order_id: str, amount: int, region: Trusted[str]) -> dict:
    """Refund part of an order.

    Args:
        order_id: The order id.
        amount: Whole currency units.
    """
    return {"order_id": order_id, "refunded": amount, "region": region}


@more.tool(read_only=True)
def ping() -> str:
    """Answer pong."""
    return "pong"


def both():
    return [shop, more]
'''

GOOD = """
store = "sqlite:///data/callgate.db"
toolboxes = ["./tools.py:shop"]

[policy]
default = "allow"

[[policy.rules]]
name = "big-refunds"
effect = "require_approval"
tools = ["shop.refund"]
when = "args.amount > 100"
reason = "refunds above 100 need a human"

[limits]
default_timeout = 12.5
max_attempts = 2
idempotency_ttl = 60

[context]
region = "eu-west-1"
"""

CAROL = Principal("carol", tenant="acme", scopes=["orders:write"])


def write(tmp_path: Path, config: str, tools: str = TOOLS) -> Path:
    (tmp_path / "tools.py").write_text(tools)
    path = tmp_path / "callgate.toml"
    path.write_text(config)
    return path


def bad(tmp_path: Path, config: str, tools: str = TOOLS) -> str:
    """The ConfigError message for ``config``, whether raised by loading or building."""
    path = write(tmp_path, config, tools)
    with pytest.raises(ConfigError) as info:
        load_config(path).build_gate("memory://")
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    return message


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CALLGATE_STORE", raising=False)
    # Module references put the config's directory on sys.path; undo it after each test.
    monkeypatch.setattr(sys, "path", list(sys.path))


def test_good_file_loads_every_section(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))

    assert config.source == tmp_path / "callgate.toml"
    assert config.toolboxes == ("./tools.py:shop",)
    assert config.limits.default_timeout == 12.5
    assert config.limits.max_attempts == 2
    assert config.limits.idempotency_ttl == timedelta(seconds=60)
    assert config.limits.max_timeout == 300.0  # untouched fields keep their defaults
    assert dict(config.context) == {"region": "eu-west-1"}
    assert [r.name for r in config.policy.rules] == ["big-refunds"]
    # A relative SQLite path is relative to the config file, not the working directory.
    assert config.store == f"sqlite:///{tmp_path / 'data' / 'callgate.db'}"


async def test_built_gate_runs_calls_with_the_configured_policy_and_context(
    tmp_path: Path,
) -> None:
    gate = load_config(write(tmp_path, GOOD)).build_gate("memory://")

    async with gate:
        small = await gate.call("shop.refund", {"order_id": "O-1", "amount": 20}, principal=CAROL)
        big = await gate.call("shop.refund", {"order_id": "O-1", "amount": 500}, principal=CAROL)

    assert [s.name for s in gate.tools()] == [
        "callgate.approval_status",
        "callgate.call_tool",
        "callgate.describe_tools",
        "callgate.read_more",
        "callgate.search_tools",
        "shop.refund",
    ]
    assert small.payload == {"order_id": "O-1", "refunded": 20, "region": "eu-west-1"}
    assert big.status == "pending_approval"
    assert big.decision is not None
    assert big.decision.rule == "big-refunds"
    assert gate.limits.max_attempts == 2


def test_store_precedence_override_then_env_then_file_then_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_config(write(tmp_path, GOOD))
    file_store = config.store

    assert config.store_url() == file_store
    monkeypatch.setenv("CALLGATE_STORE", "sqlite:///env.db")
    assert config.store_url() == "sqlite:///env.db"
    assert config.store_url("memory://") == "memory://"
    assert config.build_gate("memory://").store.url != file_store
    monkeypatch.delenv("CALLGATE_STORE")
    assert GateConfig().store_url() == default_store_url()


def test_absolute_and_non_sqlite_store_urls_are_kept(tmp_path: Path) -> None:
    absolute = load_config(write(tmp_path, f'store = "sqlite:///{tmp_path}/x.db"\n'))
    postgres = load_config(write(tmp_path, 'store = "postgresql://u@db/cg"\n'))
    memory = load_config(write(tmp_path, 'store = "memory://"\n'))

    assert absolute.store == f"sqlite:///{tmp_path}/x.db"
    assert postgres.store == "postgresql://u@db/cg"
    assert memory.store == "memory://"


def test_toolbox_reference_forms(tmp_path: Path) -> None:
    module = f"cfg_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(TOOLS)
    config = write(
        tmp_path,
        f'toolboxes = ["{module}:more", "./tools.py:shop"]\n',
    )
    factory = tmp_path / "factory.toml"
    factory.write_text('toolboxes = ["tools.py:both"]\n')

    listed = [b.name for b in load_config(config).load_toolboxes()]
    from_factory = [b.name for b in load_config(factory).load_toolboxes()]

    assert listed == ["more", "shop"]  # a module next to the config file is importable
    assert from_factory == ["shop", "more"]


def test_a_file_reference_to_an_init_loads_its_package(tmp_path: Path) -> None:
    # How tests/conformance/fixture is served: a toolbox split over modules that import
    # each other relatively, found by its path alone (the package is not on sys.path).
    package = tmp_path / "split_tools"
    package.mkdir()
    (package / "__init__.py").write_text("from .boxes import both\n")
    (package / "boxes.py").write_text(TOOLS)
    config = write(tmp_path, 'toolboxes = ["split_tools/__init__.py:both"]\n')

    boxes = load_config(config).load_toolboxes()

    assert [b.name for b in boxes] == ["shop", "more"]
    assert "split_tools" not in sys.modules


def test_unknown_keys_are_rejected_with_their_place(tmp_path: Path) -> None:
    assert (
        "storee: unknown key (allowed: store, toolboxes, policy, limits, context, secrets, "
        "principal, mcp, upstreams, auth, discovery, code_mode, lint)"
        in bad(tmp_path, 'storee = "x"\n')
    )
    assert "policy.rules[0].whn: unknown key" in bad(
        tmp_path, '[[policy.rules]]\neffect = "deny"\nwhn = "true"\n'
    )
    assert "limits.timeout: unknown key (allowed: default_timeout," in bad(
        tmp_path, "[limits]\ntimeout = 3\n"
    )


def test_wrong_values_name_the_key(tmp_path: Path) -> None:
    assert "toolboxes: Input should be a valid list" in bad(tmp_path, 'toolboxes = "x"\n')
    assert (
        "policy.rules[0].effect: Input should be 'allow', 'deny', 'require_approval' or "
        "'auto_approve'"
    ) in bad(tmp_path, '[[policy.rules]]\neffect = "maybe"\n')
    assert "limits.default_timeout: Input should be a valid number" in bad(
        tmp_path, '[limits]\ndefault_timeout = "soon"\n'
    )
    assert "limits: max_result_tokens must be at least 50" in bad(
        tmp_path, "[limits]\nmax_result_tokens = 10\n"
    )


def test_bad_cel_condition(tmp_path: Path) -> None:
    message = bad(
        tmp_path, '[[policy.rules]]\nname = "big"\neffect = "deny"\nwhen = "args.amount >"\n'
    )

    assert "policy.rules[0] ('big').when: invalid CEL condition" in message
    assert "rule 'big'" not in message


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("tools.py", "expected 'module:attr' or 'path/to/file.py:attr'"),
        ("./missing.py:shop", "no such file: "),
        ("no_such_module_zz:shop", "cannot import 'no_such_module_zz': ModuleNotFoundError"),
        ("./tools.py:nope", "'./tools.py' has no attribute 'nope'"),
        ("./tools.py:TOOLS_NAME", "is a str, not a Toolbox"),
        ("./broken.py:shop", "running "),
    ],
)
def test_bad_toolbox_reference(tmp_path: Path, reference: str, expected: str) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")

    message = bad(tmp_path, f'toolboxes = ["{reference}"]\n', TOOLS + "\nTOOLS_NAME = 'shop'\n")

    assert f"toolboxes[0] ({reference!r})" in message
    assert expected in message


def test_two_toolboxes_with_one_name(tmp_path: Path) -> None:
    message = bad(tmp_path, 'toolboxes = ["./tools.py:shop", "./tools.py:both"]\n')

    assert "toolboxes: a toolbox named 'shop' is already registered" in message


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read the config file"):
        load_config(tmp_path / "nope.toml")
    (tmp_path / "broken.toml").write_text("toolboxes = [\n")
    with pytest.raises(ConfigError, match=r"broken\.toml: invalid TOML"):
        load_config(tmp_path / "broken.toml")


def test_bad_store_url_in_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"callgate\.toml: store: not a database URL"):
        load_config(write(tmp_path, 'store = "::"\n'))


async def test_default_config_serves_the_demo() -> None:
    config = default_config()
    gate = config.build_gate("memory://")
    alice = Principal("alice", tenant="acme", scopes=["email:send"])

    async with gate:
        envelope = await gate.call(
            "ops.send_email",
            {"to": ["x@globex.example"], "subject": "s", "body": "b"},
            principal=alice,
        )

    assert config.source is None
    assert config.toolboxes == ("callgate.demo:toolboxes",)
    assert "ops.campaigns_find" in [s.name for s in gate.tools()]
    assert envelope.status == "pending_approval"  # the demo policy is in force


def test_a_rule_says_who_may_approve(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            '[[policy.rules]]\neffect = "require_approval"\napproved_by = "requester"\n'
            '[[policy.rules]]\neffect = "require_approval"\n',
        )
    )
    assert [rule.approved_by for rule in config.policy.rules] == ["requester", "another"]
    assert "policy.rules[0].approved_by: Input should be 'another' or 'requester'" in bad(
        tmp_path, '[[policy.rules]]\neffect = "require_approval"\napproved_by = "me"\n'
    )


def test_principal_section_loads_and_names_bad_keys(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            '[principal]\nuser = "alice"\ntenant = "acme"\nroles = ["oncall"]\n'
            'attributes = { domain = "acme.example" }\n',
        )
    )

    assert config.principal.user == "alice"
    assert config.principal.tenant == "acme"
    assert config.principal.roles == ("oncall",)
    assert config.principal.scopes is None  # not set: the command's default applies
    assert dict(config.principal.attributes) == {"domain": "acme.example"}
    assert GateConfig().principal.user is None
    assert "principal.usr: unknown key (allowed: user, tenant, scopes, roles, attributes)" in bad(
        tmp_path, '[principal]\nusr = "alice"\n'
    )
    assert "principal.roles: Input should be a valid list" in bad(
        tmp_path, '[principal]\nroles = "oncall"\n'
    )
