"""Whether the world moved since a preview: the approval page's warning.

The change's own preview runs again on the stored arguments (a read, bounded
by the tool's timeout); when its impact differs from what the request shows,
the approver is told before deciding, with both side by side. Applying such a
change is refused anyway (the apply checks the impact again just before it
runs); the warning saves a person from approving what will not happen.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from callgate.console import views
from callgate.runtime.gate import Gate
from callgate.store import ApprovalRecord

__all__ = ["impact_now"]

logger = logging.getLogger(__name__)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


async def impact_now(gate: Gate, record: ApprovalRecord) -> dict[str, Any] | None:
    """None when the preview's impact is unchanged; else what to warn about:
    ``{"rows": diff rows now, "facts": ..., "error": None}``, or ``{"error": text}``
    when it could not be checked."""
    if record.preview_id is None:
        return None
    try:
        now = await gate.impact_now(record.preview_id)
    except LookupError:
        return None
    except TimeoutError:
        return {
            "error": "the preview did not answer in time, so whether the situation "
            "changed is not known"
        }
    except Exception as exc:  # the tool's own failure: say so, never its text
        logger.warning("console: re-running the preview of %s failed", record.id, exc_info=exc)
        return {
            "error": "the preview could not run again, so whether the situation "
            "changed is not known"
        }
    if _same(now, record.impact):
        return None
    rows, facts = views.impact_rows(now)
    return {"rows": rows, "facts": facts, "error": None}
