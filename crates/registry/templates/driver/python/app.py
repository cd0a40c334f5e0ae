"""The driver __NAME__: answers every request by echoing the last user text.

The request and response are the neutral driver protocol (see the driver protocol in the
Murmur docs): `{"model", "messages", "tools", "system", …}` in, `{"stop_reason", "content",
"usage"}` out.
"""

import os

import murmur_guest as murmur


def last_user_text(request):
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            return " ".join(block.get("text", "") for block in message.get("content", [])
                            if block.get("type") == "text")
    return ""


def infer(request):
    model = request.get("model") or os.environ.get("MURMUR_INFERENCE_MODEL", "")
    text = f"({model}) you said: {last_user_text(request)}"
    murmur.emit_chunk(text)
    return {
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": text}],
        "usage": {"input_tokens": 0, "output_tokens": len(text.split())},
    }


Run = murmur.driver(infer)
