// The driver __NAME__: answers every request by echoing the last user text.
//
// The request and response are the neutral driver protocol (see the driver protocol in the
// Murmur docs): `{model, messages, tools, system, …}` in, `{stop_reason, content, usage}` out.

import { driver, emitChunk } from './murmur-guest.js';

function lastUserText(request) {
  for (const message of [...(request.messages ?? [])].reverse()) {
    if (message.role === 'user') {
      return (message.content ?? []).filter((b) => b.type === 'text').map((b) => b.text).join(' ');
    }
  }
  return '';
}

export const run = driver((request) => {
  const text = `(${request.model ?? ''}) you said: ${lastUserText(request)}`;
  emitChunk(text);
  return {
    stop_reason: 'end_turn',
    content: [{ type: 'text', text }],
    usage: { input_tokens: 0, output_tokens: text.split(' ').length },
  };
});
