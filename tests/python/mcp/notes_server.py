"""A test MCP server written with the official MCP Python SDK (`mcp`, pinned in
requirements.txt beside it): notes kept as files in its working directory.

    python notes_server.py stdio
    python notes_server.py http PORT       (streamable HTTP at http://127.0.0.1:PORT/mcp)

Tools: `read_note` (read-only), `write_note` (destructive), `peek` (reads any path it is
given: for confinement tests), `fetch` (one HTTP GET of a URL: for network tests), `slow`
(sleeps: for time limits), `fail` (an error result), `grow` (adds a tool and sends
`notifications/tools/list_changed`), `crash` (the server exits mid-call). `NOTES_DESCRIPTION`, when set, replaces
the description of `read_note`, so a test can change a tool a lock pinned. With
`NOTES_BEARER` set, the HTTP server answers 401 to a request without
`Authorization: Bearer <NOTES_BEARER>`. Prints nothing on stdout but the protocol; notes its start on stderr.
"""

import asyncio
import os
import pathlib
import sys
import urllib.request

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer(name="notes", version="1.2.0")


@server.tool(
    description=os.environ.get("NOTES_DESCRIPTION", "Read the note at PATH."),
    annotations=ToolAnnotations(read_only_hint=True),
)
def read_note(path: str) -> str:
    return pathlib.Path(path).read_text()


@server.tool(
    description="Write TEXT as the note at PATH, replacing it.",
    annotations=ToolAnnotations(destructive_hint=True),
)
def write_note(path: str, text: str) -> str:
    target = pathlib.Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return f"wrote {len(text)} characters to {path}"


@server.tool(description="Read any file, wherever it is; say why not when it cannot.")
def peek(path: str) -> str:
    try:
        return pathlib.Path(path).read_text()
    except OSError as error:
        return f"unreadable: {error}"


@server.tool(description="GET a URL and return its status and body; say why not when it cannot.")
def fetch(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return f"{response.status} {response.read().decode()}"
    except OSError as error:
        return f"unreachable: {error}"


@server.tool(description="Sleep for SECONDS, then say so.")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="Always fails.")
def fail() -> str:
    raise RuntimeError("this tool always fails")


@server.tool(description="Adds the tool `grown` to this server and says its tool list changed.")
async def grow(ctx: Context) -> str:
    server.add_tool(lambda: "grown", name="grown", description="Added mid-session.")
    await ctx.session.send_tool_list_changed()
    return "grew a tool"


@server.tool(description="Ends the server at once, mid-call.")
def crash() -> str:
    os._exit(3)


def require_bearer(app, token):
    """`app`, answering 401 to any HTTP request without `Authorization: Bearer <token>`."""
    wanted = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != wanted:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"no entry"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    print(f"notes_server: starting ({mode})", file=sys.stderr, flush=True)
    if mode == "stdio":
        server.run("stdio")
    elif mode == "http":
        port = int(sys.argv[2])
        bearer = os.environ.get("NOTES_BEARER")
        if bearer is None:
            asyncio.run(server.run_streamable_http_async(host="127.0.0.1", port=port))
        else:
            import uvicorn

            uvicorn.run(require_bearer(server.streamable_http_app(), bearer),
                        host="127.0.0.1", port=port, log_level="warning")
    else:
        sys.exit(f"notes_server: unknown mode {mode!r}")


if __name__ == "__main__":
    main()
