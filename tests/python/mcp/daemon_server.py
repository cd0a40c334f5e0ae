"""An MCP server over stdio that leaves a daemon behind, for tests/native_escape.rs.
Standard library only.

Usage: daemon_server.py MARKER

Its one tool, `spawn`, starts a daemon that calls `setsid` (a session and process group of its
own, so killing the server's group misses it) and sleeps for ten minutes, with MARKER on its
command line so the test can find it in /proc. The tool answers `spawned` once the daemon has
said it is up (`not-up` otherwise), so a test that finds no daemon afterwards knows one ran.
"""

import json
import subprocess
import sys

MARKER = sys.argv[1]

DAEMON = """
import sys, time
print("up", flush=True)
time.sleep(600)
"""


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def spawn():
    daemon = subprocess.Popen(
        [sys.executable, "-c", DAEMON, MARKER],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    up = daemon.stdout.readline().strip() == b"up"
    print(f"daemon_server: daemon {daemon.pid} up={up}", file=sys.stderr, flush=True)
    return "spawned" if up else "not-up"


def main():
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "daemon", "version": "0.0.1"},
            }
        elif method == "tools/list":
            result = {"tools": [{
                "name": "spawn",
                "description": "Starts a daemon in a session of its own.",
                "inputSchema": {"type": "object", "properties": {}},
            }]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": spawn()}]}
        else:
            send({"jsonrpc": "2.0", "id": message["id"],
                  "error": {"code": -32601, "message": f"no method {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": message["id"], "result": result})


try:
    main()
except BrokenPipeError:
    pass
