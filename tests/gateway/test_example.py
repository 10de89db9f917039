"""examples/gateway.toml: what docs/gateway.md shows must load and mean what it says."""

from __future__ import annotations

from pathlib import Path

from callgate.config import load_config

EXAMPLE = Path(__file__).parents[2] / "examples" / "gateway.toml"


def test_the_example_config_loads_with_its_upstreams_and_rules() -> None:
    cfg = load_config(EXAMPLE)
    time, everything = cfg.upstreams
    assert (time.name, everything.name) == ("time", "everything")
    assert not time.trusted and not everything.trusted
    now = time.tools["get_current_time"]
    assert now.rename == "now" and now.risk is not None and now.risk.value == "read"
    assert dict(now.pinned) == {"timezone": "Europe/Paris"}
    # Relative commands are the config file's: the servers scripts/upstreams.sh installs.
    assert time.command == str(EXAMPLE.parents[1] / ".cache/upstreams-py/bin/mcp-server-time")
    assert not everything.exposes("trigger-elicitation-request")
    assert everything.exposes("get-env")
    (rule,) = cfg.policy.rules
    assert rule.tools == ("everything.get-env",)
