"""docs/config.md: its complete example loads and serves, and it documents every key."""

from __future__ import annotations

import dataclasses
import re
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from callgate.codemode.settings import _CodeModeFile
from callgate.config import (
    _ApproversFile,
    _ConfigFile,
    _McpFile,
    _PolicyFile,
    _PrincipalFile,
    _RuleFile,
    _SecretFile,
    load_config,
)
from callgate.discovery.settings import _DiscoveryFile
from callgate.discovery.settings import _RuleFile as _DiscoveryRuleFile
from callgate.runtime.limits import Limits

from .readme import ROOT, block

DOC = ROOT / "docs" / "config.md"


def _example() -> str:
    [example] = re.findall(r"```toml\n(.*?)```", DOC.read_text(), flags=re.S)
    return example


def _documented() -> set[str]:
    """The keys of the doc's tables (``[[policy.rules]]`` counts as ``rules``)."""
    rows = re.findall(r"^\| `([^`]+)` \|", DOC.read_text(), flags=re.M)
    return {row.strip("[]").rpartition(".")[2] for row in rows}


def test_every_key_the_file_accepts_is_documented_and_in_the_example() -> None:
    keys = {
        *_ConfigFile.model_fields,
        *_PolicyFile.model_fields,
        *_RuleFile.model_fields,
        *_PrincipalFile.model_fields,
        *_ApproversFile.model_fields,
        *_SecretFile.model_fields,
        *_McpFile.model_fields,
        *_DiscoveryFile.model_fields,
        *_DiscoveryRuleFile.model_fields,
        *_CodeModeFile.model_fields,
        *(f.name for f in dataclasses.fields(Limits)),
    }
    example = _example()

    assert keys <= _documented(), keys - _documented()
    missing = {k for k in keys if not re.search(rf"(^|[\[.\s]){k}\b", example, flags=re.M)}
    assert not missing


def test_the_complete_example_loads_and_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CALLGATE_STORE", raising=False)
    monkeypatch.setenv("SHOP_API_KEY", "sk-shop")
    monkeypatch.setattr(sys, "path", list(sys.path))
    # The example serves the README's own toolbox (Serve your own tools) next to the demo.
    (tmp_path / "my_tools.py").write_text(block("Serve your own tools", "python").text)
    (tmp_path / "callgate.toml").write_text(_example())

    config = load_config(tmp_path / "callgate.toml")
    gate = config.build_gate("memory://")

    names = {spec.name for spec in gate.tools()}
    assert {"shop.order_status", "shop.order_cancel", "ops.deploy_rollback"} <= names
    assert config.store == f"sqlite:///{tmp_path / 'data' / 'callgate.db'}"
    assert [r.name for r in config.policy.rules] == [
        "cancel-needs-a-human",
        "budget-needs-the-owner",
        "rollback-needs-oncall",
        "confirm-external-email",
    ]
    assert config.limits.approval_ttl == timedelta(hours=24)
    assert config.limits.idempotency_ttl == timedelta(hours=24)
    assert config.principal.roles == ("oncall",)
    assert dict(config.principal.attributes) == {"domain": "acme.example"}
    assert dict(config.context) == {"region": "eu-west-1"}
    assert dict(config.secrets) == {"shop_api_key": "SHOP_API_KEY"}
