// Murmur's guest helpers for JavaScript components (built with componentize-js against the
// `tool` or `driver` world of `wit/`). `mur new … --lang js` puts a copy beside the source.
//
// The contract is the WIT, not this file: `run` gets one `tool-input` and returns one
// `tool-result`. This file turns a plain function into that export:
//
//   import { tool, passed, failed } from './murmur-guest.js';
//   export const run = tool((args) => passed(`hello ${args.name}`));
//
// - The handler gets the call's input parsed as JSON (`{}` when there is none) and returns a
//   result: one of the builders below, a string (passed, used verbatim), or any other value
//   (passed, as JSON).
// - `throw new Failed("why")`: the operation did not succeed (`status: failed`).
// - Any other exception is the tool's own error: `status: error`, its message as the summary,
//   its stack as the data. Nothing traps, so the message reaches the model and the trace.
// - Files (tools only): see `murmur-files.js`.

import { emitChunk, emitThinkingChunk } from 'murmur:text/chunks@0.1.0';

export { emitChunk, emitThinkingChunk };

/** Reserved metadata keys: for each, the first pair wins. */
export const CONTINUATION_ID = 'continuation_id';
export const STATE_EFFECT = 'state_effect';
export const RESOURCE_ID = 'resource_id';

/** Raised by a handler when the operation did not succeed: the call ends `failed`. */
export class Failed extends Error {}

function result(status, data, options = {}) {
  const metadata = [];
  if (options.continuationId) metadata.push([CONTINUATION_ID, options.continuationId]);
  if (options.stateEffect) metadata.push([STATE_EFFECT, options.stateEffect]);
  if (options.resourceId) metadata.push([RESOURCE_ID, options.resourceId]);
  for (const pair of options.metadata ?? []) metadata.push(pair);
  return {
    status,
    summary: options.summary,
    data: data == null ? undefined : typeof data === 'string' ? data : JSON.stringify(data),
    dataPath: options.dataPath,
    truncated: options.truncated ?? false,
    metadata,
  };
}

/**
 * The call succeeded. `data` (a string, used verbatim, or a value sent as JSON) is the result;
 * options: `summary`, `dataPath` (a file under the workdir holding a large result, read when
 * `data` is absent), `truncated`, `stateEffect` ('read' | 'mutate'), `resourceId`,
 * `continuationId` (drivers), `metadata` (more [key, value] pairs).
 */
export const passed = (data, options) => result('passed', data, options);
/** The operation did not succeed (a missing file, a refused request): the model is told. */
export const failed = (data, options) => result('failed', data, options);
/** The tool itself broke. */
export const error = (data, options) => result('error', data, options);

function parse(input) {
  const text = input?.data;
  if (text == null || text === '') return {};
  return JSON.parse(text);
}

function asResult(value) {
  if (value && typeof value === 'object' && typeof value.status === 'string' && 'metadata' in value) {
    return value;
  }
  return passed(value ?? '');
}

function thrown(exception) {
  if (exception instanceof Failed) return failed(exception.message, { summary: exception.message });
  const message = exception instanceof Error ? `${exception.name}: ${exception.message}` : String(exception);
  const stack = exception instanceof Error && exception.stack ? `${message}\n${exception.stack}` : message;
  return error(stack, { summary: message });
}

/** The `murmur:tool/run` export of a tool: `export const run = tool(handler)`. */
export function tool(handler) {
  return {
    run(input) {
      let args;
      try {
        args = parse(input);
      } catch (e) {
        return failed(`the input is not JSON: ${e.message}`, { summary: 'the input is not JSON' });
      }
      try {
        return asResult(handler(args, { logPath: input?.logPath }));
      } catch (e) {
        return thrown(e);
      }
    },
  };
}

/**
 * The `murmur:tool/run` export of a driver: the handler gets the neutral inference request
 * and returns the neutral response (`{stop_reason, content, usage}`). A thrown error becomes
 * the protocol's error answer (`stop_reason: "error"`).
 */
export function driver(handler) {
  return {
    run(input) {
      try {
        const response = handler(parse(input));
        if (response && typeof response === 'object' && typeof response.status === 'string' && 'metadata' in response) {
          return response;
        }
        return passed(response);
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        return error({ stop_reason: 'error', error: { message } }, { summary: message });
      }
    },
  };
}
