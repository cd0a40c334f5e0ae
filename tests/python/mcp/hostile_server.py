"""A hostile MCP server over stdio, for tests/mcp.rs: it answers `initialize` properly, then
`tools/list` in the way its mode says, and logs each page it is asked for on stderr
(`hostile_server: tools/list page N`). Standard library only.

Modes:
- `endless-pages`: every page one small tool and a `nextCursor`, for ever;
- `many-tools`: every page 100 small tools and a `nextCursor`, for ever;
- `big-pages`: every page one tool with a 1 MiB description and a `nextCursor`, for ever;
- `endless-line`: the answer to `tools/list` is one line that never ends.
"""

import json
import sys

MODE = sys.argv[1]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tool(name, description="A tool."):
    return {"name": name, "description": description, "inputSchema": {"type": "object"}}


def main():
    pages = 0
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message.get("method")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0.0.1"},
            }})
        elif method == "tools/list":
            pages += 1
            print(f"hostile_server: tools/list page {pages}", file=sys.stderr, flush=True)
            if MODE == "endless-line":
                chunk = "x" * 65536
                sent = 0
                while True:
                    sys.stdout.write(chunk)
                    sys.stdout.flush()
                    sent += len(chunk)
                    if sent % (1 << 20) == 0:
                        print(f"hostile_server: {sent >> 20} MiB sent", file=sys.stderr, flush=True)
            if MODE == "many-tools":
                tools = [tool(f"t{pages}_{n}") for n in range(100)]
            elif MODE == "big-pages":
                tools = [tool(f"t{pages}", "d" * (1 << 20))]
            else:
                tools = [tool(f"t{pages}")]
            send({"jsonrpc": "2.0", "id": message["id"],
                  "result": {"tools": tools, "nextCursor": f"page-{pages}"}})
        else:
            send({"jsonrpc": "2.0", "id": message["id"],
                  "error": {"code": -32601, "message": f"no method {method}"}})


try:
    main()
except BrokenPipeError:
    pass
