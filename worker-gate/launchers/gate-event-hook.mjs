// A lifecycle hook of a real agent (docs/worker-gate.md#running-real-agents, event table): the tool runs it with the hook's JSON
// on stdin and the name of its event as the argument; it posts the gate event that the hook event maps to, to
// GATE_EVENT_URL with the run's GATE_EVENT_TOKEN (both inherited from the tool's environment).
//
// Plain JavaScript with no imports of the project: a hook runs at every turn of the agent, and on Node 20 a TypeScript
// loader would add about a second to each. It follows the retry rules of docs/worker-gate.md#worker-gate without holding the agent: it
// tries for HOOK_BUDGET_MS (QUESTION_BUDGET_MS for a question, whose hook has a longer timeout), and an event not delivered by
// then is handed to a detached copy of this script (`--deliver`) that keeps trying for AGENT_EVENT_RETRY_SEC, while the hook
// itself returns. It prints nothing (the tool reads a hook's stdout as its decision, and silence lets the agent go on),
// but for a question the gate took: then it refuses the tool call with a reason that tells the agent to end its turn,
// since the answer comes as the prompt of its resumed session (docs/worker-gate.md#resuming-a-run). Codex shows a
// PreToolUse refusal's reason to the model as the call's output; Claude Code shows a PermissionRequest denial's message
// (an `interrupt` would end it with status 1 instead).
import { spawn } from 'node:child_process';

const HOOK_BUDGET_MS = 2_000;
/**
 * A question is the one event whose delivery decides what the agent does next: taken by the gate, the tool call is refused
 * and the agent ends its turn; not taken in time, the agent goes on without its answer. Its hook is given 10 s by the tool
 * (codex.ts, claude-code.ts), so a busy machine that is slow to start the hook or to answer it still gets it there.
 */
const QUESTION_BUDGET_MS = 8_000;
const POST_TIMEOUT_MS = 1_500;
const MAX_STDIN_BYTES = 1024 * 1024;
const MAX_TEXT = 20_000;

/** The gate event for a hook event, or null for one the gate does not follow. */
function gateEventFor(hookEvent, input) {
  switch (hookEvent) {
    case 'SessionStart':
      return { event: 'session-start', message: `session started (${String(input.source ?? 'startup')})` };
    case 'Stop':
      return { event: 'session-idle', message: text(input.last_assistant_message) ?? 'turn ended' };
    case 'PreToolUse':
      // Codex's question to the user is a tool call; any other tool is the agent at work.
      if (input.tool_name !== 'request_user_input') return null;
      return { event: 'ask-user-question', question: questionOf(input.tool_input), question_detail: questionDetailOf(input.tool_input), message: 'the agent asks the user' };
    case 'PermissionRequest':
      return {
        event: 'ask-user-question',
        question: `permission for ${toolName(input)}: ${text(JSON.stringify(input.tool_input ?? {}))}`,
        question_detail: permissionDetailOf(input),
        message: 'the agent asks for a permission',
      };
    case 'SessionEnd':
      return { event: 'session-stop', message: `session ended (${String(input.reason ?? 'other')})` };
    default:
      return null;
  }
}

function text(value) {
  return typeof value === 'string' && value.length > 0 ? value.slice(0, MAX_TEXT) : null;
}

const short = (value, max) => (typeof value === 'string' ? value.slice(0, max) : null);
const toolName = (input) => (typeof input.tool_name === 'string' && input.tool_name.length > 0 ? input.tool_name.slice(0, 200) : 'a tool');

/** The questions with their choices, as worker-gate/contract/agent-question.ts bounds them. */
function questionDetailOf(toolInput) {
  const asked = (Array.isArray(toolInput?.questions) ? toolInput.questions : []).slice(0, 5).flatMap((q) => {
    const question = short(q?.question, 4000) ?? short(q?.header, 4000);
    if (!question) return [];
    const options = (Array.isArray(q?.options) ? q.options : []).slice(0, 10).flatMap((option) => {
      const label = short(option?.label, 200);
      return label ? [{ label, description: short(option?.description, 4000) }] : [];
    });
    return [{ header: short(q?.header, 200), question, options }];
  });
  return asked.length > 0 ? { kind: 'question', questions: asked } : undefined;
}

/** The tool call a permission request is for; its arguments only where they fit the gate's bound (8 KiB). */
function permissionDetailOf(input) {
  const toolInput = input.tool_input !== null && typeof input.tool_input === 'object' && !Array.isArray(input.tool_input) ? input.tool_input : {};
  const fits = JSON.stringify(toolInput).length <= 8000;
  return { kind: 'permission', tool_name: toolName(input), tool_input: fits ? toolInput : { note: 'the arguments were too long to show' } };
}

/** What the hook answers the tool once the gate has the question: the call is refused, and the agent ends its turn. */
function refusalFor(hookEvent) {
  const reason = 'The operator has been asked and will answer in your next message. Do not go on and do not ask again: end your turn now.';
  if (hookEvent === 'PreToolUse') return { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'deny', permissionDecisionReason: reason } };
  return { hookSpecificOutput: { hookEventName: 'PermissionRequest', decision: { behavior: 'deny', message: reason } } };
}

function questionOf(toolInput) {
  const questions = Array.isArray(toolInput?.questions) ? toolInput.questions : [];
  const asked = questions.map((q) => text(q?.question) ?? text(q?.header)).filter(Boolean);
  return (asked.length > 0 ? asked.join('\n') : text(JSON.stringify(toolInput ?? {})) ?? 'a question').slice(0, MAX_TEXT);
}

async function readStdin() {
  const chunks = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += chunk.length;
    if (size > MAX_STDIN_BYTES) break;
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return {};
  }
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

/**
 * Posts until accepted, a final answer (a 4xx but 429), or `giveUpAt`: 'accepted', 'refused' (final), or false. Each
 * try waits at most `tryMs` for the answer.
 */
async function post(body, giveUpAt, tryMs = POST_TIMEOUT_MS) {
  for (let attempt = 1; ; attempt += 1) {
    try {
      const response = await fetch(process.env.GATE_EVENT_URL, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${process.env.GATE_EVENT_TOKEN}` },
        body,
        signal: AbortSignal.timeout(Math.max(100, Math.min(tryMs, giveUpAt - Date.now()))),
      });
      await response.text().catch(() => '');
      if (response.ok) return 'accepted';
      if (response.status !== 429 && response.status < 500) return 'refused';
    } catch {
      // Not reached, or timed out: try again.
    }
    const wait = Math.round(Math.min(10_000, 250 * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2));
    if (Date.now() + wait > giveUpAt) return false;
    await sleep(wait);
  }
}

async function hook(hookEvent) {
  const input = await readStdin();
  const mapped = gateEventFor(hookEvent, input);
  if (!mapped || !process.env.GATE_EVENT_URL || !process.env.GATE_EVENT_TOKEN) return;
  const body = JSON.stringify({
    ...mapped,
    run_id: process.env.RUN_ID,
    project_id: process.env.PROJECT_ID,
    session_id: typeof input.session_id === 'string' ? input.session_id.slice(0, 200) : undefined,
    timestamp: new Date().toISOString(),
  });
  // A question waits on a slow answer too: a try given up on would leave the gate holding the question while the agent,
  // never told, goes on.
  const question = mapped.event === 'ask-user-question';
  const delivered = question ? await post(body, Date.now() + QUESTION_BUDGET_MS, QUESTION_BUDGET_MS) : await post(body, Date.now() + HOOK_BUDGET_MS);
  if (delivered === 'accepted' && question) process.stdout.write(JSON.stringify(refusalFor(hookEvent)));
  if (delivered) return;
  const deliverer = spawn(process.execPath, [process.argv[1], '--deliver'], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  deliverer.stdin.end(body);
  deliverer.unref();
}

async function deliver() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const retrySec = Number(process.env.AGENT_EVENT_RETRY_SEC ?? 600);
  await post(Buffer.concat(chunks).toString('utf8'), Date.now() + (Number.isFinite(retrySec) ? retrySec : 600) * 1000);
}

const argument = process.argv[2] ?? '';
await (argument === '--deliver' ? deliver() : hook(argument));
