"""The demo's skills: Agent Skills folders for the ``ops`` toolbox's recurring tasks.

``release-rollback`` (investigate a bad release, roll it back safely) and
``campaign-budget-change`` (preview, confirm and apply a daily budget change).
Each is a folder of ``SKILL.md`` and a reference file, shipped in the package;
load them with ``callgate.discovery.skills.load_skills([DEMO_SKILLS])``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEMO_SKILLS"]

DEMO_SKILLS = Path(__file__).parent / "skills"
"""The folder holding the demo's skill folders."""
