"""Drives `mur mcp serve` with the official MCP Python SDK's client (`mcp`, pinned in
requirements.txt beside it), as any MCP client would:

    python serve_client.py stdio CALLS MUR ARG…     (spawns `MUR ARG…` and talks over its stdio)
    python serve_client.py http CALLS URL [TOKEN]   (streamable HTTP, with the bearer TOKEN)

CALLS is a JSON list of `{"name": …, "arguments": {…}}`. Prints one JSON document: the
server's `serverInfo`, the tools it lists, and of each call `{"text", "is_error"}`, or
`{"error"}` when the call raised. With `REPLY` set, the client takes elicitation requests and
answers each by accepting `{"reply": REPLY}`; `asked` lists their messages.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client


async def drive(read, write, calls):
    asked = []
    reply = os.environ.get("REPLY")

    async def answer(_context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"reply": reply})

    callback = answer if reply is not None else None
    async with ClientSession(read, write, elicitation_callback=callback) as session:
        started = await session.initialize()
        listed = await session.list_tools()
        out = {
            "server": {"name": started.server_info.name, "version": started.server_info.version},
            "tools": [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools],
            "calls": [],
            "asked": asked,
        }
        for call in calls:
            try:
                result = await session.call_tool(call["name"], call.get("arguments", {}))
                text = "\n".join(block.text for block in result.content if block.type == "text")
                out["calls"].append({"text": text, "is_error": bool(result.is_error)})
            except Exception as error:  # the test reads what went wrong
                out["calls"].append({"error": f"{type(error).__name__}: {error}"})
        return out


async def main():
    mode, calls = sys.argv[1], json.loads(sys.argv[2])
    if mode == "stdio":
        # The server gets this process's environment (the SDK passes a minimal one by default).
        server = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:], env=dict(os.environ))
        async with stdio_client(server) as (read, write):
            out = await drive(read, write, calls)
    else:
        url = sys.argv[3]
        headers = {"Authorization": f"Bearer {sys.argv[4]}"} if len(sys.argv) > 4 else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as client:
            async with streamable_http_client(url, http_client=client) as streams:
                out = await drive(streams[0], streams[1], calls)
    print(json.dumps(out))


asyncio.run(main())
