"""``[limits.rate]`` in a config file, as ``callgate serve`` reads it: the gate it
builds refuses the call over the limit; a bad key stops loading, naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from callgate.config import ConfigError, load_config
from callgate.contract import Principal
from callgate.errors import ErrorKind

pytestmark = pytest.mark.anyio

CONFIG = """\
toolboxes = ["callgate.demo:toolboxes"]

[limits.rate]
per_principal = "2/minute"
backend = "memory"
"""


async def test_the_config_files_limit_holds(tmp_path: Path) -> None:
    path = tmp_path / "callgate.toml"
    path.write_text(CONFIG, encoding="utf-8")
    cfg = load_config(path)
    who = Principal("alice", tenant="acme", scopes={"deploy:read"})
    async with cfg.build_gate("memory://") as gate:
        envelopes = [
            await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=who)
            for _ in range(3)
        ]

    assert [e.status for e in envelopes[:2]] == ["ok", "ok"]
    refused = envelopes[2]
    assert refused.error is not None and refused.error.kind is ErrorKind.TRANSIENT
    assert "2/minute" in refused.error.message_for_model


def test_a_bad_key_of_the_table_is_named(tmp_path: Path) -> None:
    path = tmp_path / "callgate.toml"
    path.write_text(CONFIG.replace("per_principal", "per_principle"), encoding="utf-8")

    with pytest.raises(ConfigError, match=r"limits\.rate\.per_principle"):
        load_config(path)
