// The tool __NAME__: reads a text file of the session workdir, or writes one.
//
// `murmur-guest.js` (beside this file) turns the handler into the component's export;
// `murmur-files.js` reads and writes the workdir; `wit/` holds the worlds it is built against.
// Anything thrown here reaches the model and the trace as the tool's error, with its message.

import { tool, passed } from './murmur-guest.js';
import { readText, writeText } from './murmur-files.js';

export const run = tool((args) => {
  const path = args.path;
  if (typeof args.write === 'string') {
    writeText(path, args.write);
    return passed(`wrote ${args.write.length} characters to ${path}`, {
      stateEffect: 'mutate',
      resourceId: `file:${path}`,
    });
  }
  return passed(readText(path), { summary: `read ${path}`, stateEffect: 'read', resourceId: `file:${path}` });
});
