"""crashpoint's serve protocol, the loop of it (``serve.py`` beside worker.py, and the MCP
agent's, which borrows this package): answer the handshake in kind, then one JSON reply
per request line until stdin closes."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

PROTOCOL = {"protocol": "crashpoint-serve", "version": 1}


def serve(answer: Callable[[dict[str, Any]], dict[str, Any]], **handshake: Any) -> int:
    """Serve until stdin closes; ``handshake`` adds to the reply (``scope="run"``)."""
    if not sys.stdin.readline():
        return 0
    print(json.dumps({**PROTOCOL, **handshake}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = answer(json.loads(line))
        except Exception as exc:  # one bad request must not end the server
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(reply), flush=True)
    return 0
