"""The tool __NAME__: reads a text file of the session workdir, or writes one.

`murmur_guest` (beside this file) turns `handle` into the component's export; `wit/` holds the
worlds it is built against. Anything raised here reaches the model and the trace as the
tool's error, with its message.
"""

import murmur_guest as murmur


def handle(args):
    path = args["path"]
    if "write" in args:
        with open(path, "w", encoding="utf-8") as file:
            file.write(args["write"])
        return murmur.passed(f"wrote {len(args['write'])} characters to {path}",
                             state_effect="mutate", resource_id=f"file:{path}")
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        raise murmur.Failed(f"{path}: no such file in the workdir")
    return murmur.passed(text, summary=f"read {path}", state_effect="read",
                         resource_id=f"file:{path}")


Run = murmur.tool(handle)
