"""The hook __NAME__: denies tool calls whose input names a path under `.git/`.

Every handler of `murmur:hook/lifecycle` is exported; each returns a hook output (`none`
commits nothing). Raising `Err(text)` reports the hook's own failure (at the decision point a
failing policy hook denies).
"""

import json

from wit_world import exports
from wit_world.exports.lifecycle import HookOutput_Deny, HookOutput_None_


def names_git(value):
    if isinstance(value, str):
        return value == ".git" or value.startswith(".git/") or "/.git/" in value
    if isinstance(value, dict):
        return any(names_git(v) for v in value.values())
    if isinstance(value, list):
        return any(names_git(v) for v in value)
    return False


class Lifecycle(exports.Lifecycle):
    def on_tool_call(self, event):
        if event.outcome is None and names_git(json.loads(event.input or "null")):
            return HookOutput_Deny(f"{event.tool_name}: paths under .git/ are off limits")
        return HookOutput_None_()

    def on_stage(self, event):
        return HookOutput_None_()

    def on_session_start(self, event):
        return HookOutput_None_()

    def on_task_start(self, event):
        return HookOutput_None_()

    def on_inference(self, event):
        return HookOutput_None_()

    def on_shell(self, event):
        return HookOutput_None_()

    def on_compaction(self, event):
        return HookOutput_None_()

    def on_task_end(self, event):
        return HookOutput_None_()

    def on_session_end(self, event):
        return HookOutput_None_()
