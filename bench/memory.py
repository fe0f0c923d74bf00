"""Memory to hold N decoded `tools/call` requests, measured in a fresh process.

    .venv/bin/python -m bench.memory ANCHOR [N]      # ANCHOR: mcpbind, mcp-types, orjson

Prints one JSON object: the resident set size grown by decoding and keeping the N messages
(``held``), the peak growth while doing so (``peak``, from VmHWM), both in bytes, and the
tracemalloc-free wall time. The N input byte strings exist before the baseline is taken.
"""

from __future__ import annotations

import gc
import json
import sys
import time

REVISION = "2025-11-25"


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def main(anchor: str, n: int) -> dict[str, object]:
    from .workloads import call_tool_params, request

    if anchor == "mcpbind":
        import mcpbind

        codec = mcpbind.Codec(REVISION, "server")
        decode = codec.decode
    elif anchor == "mcp-types":
        from mcp_types import jsonrpc, methods

        validate = jsonrpc.jsonrpc_message_adapter.validate_json
        parse = methods.parse_client_request

        def decode(data: bytes) -> object:
            return parse("tools/call", REVISION, validate(data).params)

    elif anchor == "orjson":
        import orjson

        decode = orjson.loads
    else:
        raise SystemExit(f"unknown anchor {anchor!r}")
    datas = [request("tools/call", call_tool_params(i), id=i).data for i in range(n)]
    decode(datas[0])  # first-use work (decoder construction) happens before the baseline
    gc.collect()
    base = _status("VmRSS")
    start = time.perf_counter()
    held = [decode(d) for d in datas]
    seconds = time.perf_counter() - start
    gc.collect()
    after = _status("VmRSS")
    peak = _status("VmHWM")
    assert len(held) == n
    return {"anchor": anchor, "n": n, "held": after - base, "peak": peak - base, "seconds": seconds}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100_000)))
