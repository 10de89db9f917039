"""A gate process for the crash tests; the parent kills it with SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

from callgate import Gate, Principal, Toolbox
from callgate.store import SQLStore


def main() -> None:
    mode, url, schema, marker = sys.argv[1:5]
    box = Toolbox("crash")

    @box.tool(idempotent=False)
    def pay(amount: int) -> str:
        """Pays; the parent kills the process while it runs."""
        Path(marker).write_text("started")
        time.sleep(60)
        return "paid"

    @box.tool(read_only=True)
    def look() -> str:
        """Reads."""
        return "seen"

    async def run() -> None:
        gate = Gate([box], store=SQLStore(url, schema=schema or None))
        principal = Principal(user="alice", tenant="acme")
        if mode == "during":
            await gate.call("crash.pay", {"amount": 5}, principal=principal)
        else:
            env = await gate.call("crash.look", {}, principal=principal)
            # The Envelope is in hand: its audit record must already be durable,
            # so dying right now (no close, no flush) loses nothing.
            print(env.call_id, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(run())


if __name__ == "__main__":
    main()
