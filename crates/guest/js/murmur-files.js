// Files for JavaScript tools (the `tool` world): the session workdir is the component's `.`
// when the capsule grants it a filesystem, reached through `wasi:filesystem`. Every path is
// relative to the workdir; one that leaves it (`..`, an absolute path, a link planted to the
// outside) is refused by the runtime, and the refusal is thrown as an Error naming the path.

import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';

function workdir() {
  const found = getDirectories();
  const dot = found.find(([, name]) => name === '.') ?? found[0];
  if (!dot) throw new Error('this tool has no workdir: the capsule grants it no filesystem');
  return dot[0];
}

function refused(path, e) {
  const code = e?.payload ?? e?.message ?? String(e);
  return new Error(`${path}: ${code}`);
}

/** The bytes of the file at `path` (relative to the workdir). */
export function readBytes(path) {
  let file;
  try {
    file = workdir().openAt({ symlinkFollow: false }, path, {}, { read: true });
  } catch (e) {
    throw refused(path, e);
  }
  const stream = file.readViaStream(0n);
  const chunks = [];
  let size = 0;
  for (;;) {
    let chunk;
    try {
      chunk = stream.blockingRead(65536n);
    } catch (e) {
      if (e?.payload?.tag === 'closed' || e?.tag === 'closed') break;
      throw refused(path, e);
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

/** The text (UTF-8) of the file at `path`. */
export function readText(path) {
  return new TextDecoder().decode(readBytes(path));
}

/** Writes `text` (UTF-8) to the file at `path`, replacing what it held. */
export function writeText(path, text) {
  let file;
  try {
    file = workdir().openAt({ symlinkFollow: false }, path, { create: true, truncate: true }, { write: true });
  } catch (e) {
    throw refused(path, e);
  }
  const bytes = new TextEncoder().encode(text);
  const stream = file.writeViaStream(0n);
  for (let at = 0; at < bytes.length; at += 4096) {
    stream.blockingWriteAndFlush(bytes.subarray(at, at + 4096));
  }
}
