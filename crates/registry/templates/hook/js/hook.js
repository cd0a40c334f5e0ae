// The hook __NAME__: denies tool calls whose input names a path under `.git/`.
//
// Every handler of `murmur:hook/lifecycle` is exported; each returns a hook output
// (`{ tag: 'none' }` commits nothing). A thrown error reports the hook's own failure (at the
// decision point a failing policy hook denies).

function namesGit(value) {
  if (typeof value === 'string') return value === '.git' || value.startsWith('.git/') || value.includes('/.git/');
  if (Array.isArray(value)) return value.some(namesGit);
  if (value && typeof value === 'object') return Object.values(value).some(namesGit);
  return false;
}

const none = () => ({ tag: 'none' });

export const lifecycle = {
  onToolCall(event) {
    if (event.outcome === undefined && namesGit(JSON.parse(event.input || 'null'))) {
      return { tag: 'deny', val: `${event.toolName}: paths under .git/ are off limits` };
    }
    return none();
  },
  onStage: none,
  onSessionStart: none,
  onTaskStart: none,
  onInference: none,
  onShell: none,
  onCompaction: none,
  onTaskEnd: none,
  onSessionEnd: none,
};
