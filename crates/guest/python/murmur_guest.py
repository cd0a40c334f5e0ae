"""Murmur's guest helpers for Python components (built with componentize-py against the `tool`
or `driver` world of `wit/`). `mur new … --lang python` puts a copy beside the source.

The contract is the WIT, not this file: `run` gets one `tool-input` and returns one
`tool-result`. This module turns a plain function into that export::

    import murmur_guest as murmur

    def greet(args):
        return murmur.passed(f"hello {args['name']}")

    Run = murmur.tool(greet)

- The handler gets the call's input parsed as JSON (``{}`` when there is none) and returns a
  result: one of the builders below, a string (passed, used verbatim), or any other value
  (passed, as JSON).
- ``raise murmur.Failed("why")``: the operation did not succeed (``status: failed``).
- Any other exception is the tool's own error: ``status: error``, ``Type: message`` as the
  summary, the traceback as the data. Nothing traps, so the message reaches the model and the
  trace.
- Files: the session workdir is the component's current directory when the capsule grants it
  a filesystem; ``open("notes.md")`` works there, and a path that leaves it is refused by the
  runtime (``PermissionError``).
"""

import json
import traceback

from wit_world import exports as _exports
from wit_world.exports import run as _run

try:  # `murmur:text/chunks`: in the tool and driver worlds.
    from wit_world.imports import chunks as _chunks
except ImportError:  # pragma: no cover - a world without it
    _chunks = None

try:  # `murmur:task/task`: in the tool world only.
    from wit_world.imports import task as _task
except ImportError:
    _task = None

# Reserved metadata keys: for each, the first pair wins.
CONTINUATION_ID = "continuation_id"
STATE_EFFECT = "state_effect"
RESOURCE_ID = "resource_id"


class Failed(Exception):
    """Raised by a handler when the operation did not succeed: the call ends ``failed``."""


def _result(status, data, summary, data_path, truncated, state_effect, resource_id,
            continuation_id, metadata):
    pairs = []
    if continuation_id:
        pairs.append((CONTINUATION_ID, continuation_id))
    if state_effect:
        pairs.append((STATE_EFFECT, state_effect))
    if resource_id:
        pairs.append((RESOURCE_ID, resource_id))
    pairs.extend((str(k), str(v)) for k, v in metadata)
    if data is not None and not isinstance(data, str):
        data = json.dumps(data)
    return _run.ToolResult(status=status, summary=summary, data=data, data_path=data_path,
                           truncated=truncated, metadata=pairs)


def passed(data=None, *, summary=None, data_path=None, truncated=False, state_effect=None,
           resource_id=None, continuation_id=None, metadata=()):
    """The call succeeded. ``data`` (a string, used verbatim, or a value sent as JSON) is the
    result; ``data_path`` names a file under the workdir holding a large result (read when
    ``data`` is None); ``state_effect`` is ``"read"`` or ``"mutate"``; ``resource_id`` names
    what was touched (``"file:notes.md"``); ``continuation_id`` is for drivers."""
    return _result(_run.Status.PASSED, data, summary, data_path, truncated, state_effect,
                   resource_id, continuation_id, metadata)


def failed(data=None, *, summary=None, data_path=None, truncated=False, state_effect=None,
           resource_id=None, metadata=()):
    """The operation did not succeed (a missing file, a refused request): the model is told."""
    return _result(_run.Status.FAILED, data, summary, data_path, truncated, state_effect,
                   resource_id, None, metadata)


def error(data=None, *, summary=None, metadata=()):
    """The tool itself broke."""
    return _result(_run.Status.ERROR, data, summary, None, False, None, None, None, metadata)


def emit_chunk(text):
    """Streams text to the session as it is produced."""
    if _chunks is not None:
        _chunks.emit_chunk(text)


def emit_thinking_chunk(text):
    """Streams reasoning text to the session."""
    if _chunks is not None:
        _chunks.emit_thinking_chunk(text)


def request_input(prompt):
    """Asks a person while an A2A task runs and returns the reply (tool world only). Outside
    an A2A task it raises; ``mur tool invoke --reply TEXT`` answers it when testing."""
    if _task is None:
        raise RuntimeError("request_input is in the tool world only")
    return _task.request_input(prompt)


def _parse(tool_input):
    text = tool_input.data
    if text is None or text == "":
        return {}
    return json.loads(text)


def _as_result(value):
    if isinstance(value, _run.ToolResult):
        return value
    return passed("" if value is None else value)


def _thrown(exception):
    if isinstance(exception, Failed):
        return failed(str(exception), summary=str(exception))
    message = f"{type(exception).__name__}: {exception}"
    return error(traceback.format_exc(), summary=message)


def tool(handler):
    """The class componentize-py exports for a tool: ``Run = tool(handler)``."""

    class Run(_exports.Run):
        def run(self, input):
            try:
                args = _parse(input)
            except ValueError as e:
                return failed(f"the input is not JSON: {e}", summary="the input is not JSON")
            try:
                return _as_result(handler(args))
            except Exception as e:  # noqa: BLE001 - every failure is reported, none traps
                return _thrown(e)

    return Run


def driver(handler):
    """The class componentize-py exports for a driver: the handler gets the neutral inference
    request and returns the neutral response (``{"stop_reason", "content", "usage"}``); an
    exception becomes the protocol's error answer (``stop_reason: "error"``)."""

    class Run(_exports.Run):
        def run(self, input):
            try:
                return _as_result(handler(_parse(input)))
            except Exception as e:  # noqa: BLE001
                message = f"{type(e).__name__}: {e}"
                return error({"stop_reason": "error", "error": {"message": message}},
                             summary=message)

    return Run
