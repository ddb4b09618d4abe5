import { realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { LaunchedRuntime } from '../../worker-gate/contract/agent-runtimes.ts';
import { agentRecordsPath } from '../../worker-gate/launchers/records.ts';
import { gateClient, startGateProcess, writeGateConfig, type CallbackReceiver, type GateFixture, type GateProcess } from './gate.ts';

/**
 * How long a real agent's launcher may take to print its root and exit: about a second alone, but a loaded two-core CI
 * run, where the real-agent files start side by side, once kept one past 30 s. Runs on a real agent use it on the gate
 * and on the control plane alike, so the control plane never gives up on a dispatch the gate still runs.
 */
export const AGENT_DISPATCH_TIMEOUT_SEC = 120;

/** A real gate process whose runs start a real agent tool (agent_runtime), for the tests of each tool. */
export interface AgentGate {
  fixture: GateFixture;
  process: GateProcess;
  client: ReturnType<typeof gateClient>;
}

export async function startAgentGate(
  receiver: CallbackReceiver,
  runtime: LaunchedRuntime,
  env: Record<string, string>,
  overrides: Record<string, unknown> = {},
): Promise<AgentGate> {
  // A file's tests run side by side on its gates, each with a run of its own.
  const fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { agent_runtime: runtime, dispatch_timeout_sec: AGENT_DISPATCH_TIMEOUT_SEC, run_slots: 8, ...overrides } });
  const process = await startGateProcess(fixture, env);
  return { fixture, process, client: gateClient(fixture) };
}

/** Prepares project `key` with a prompt holding the key; answers the /dispatch body of run `<key>-<n>-run`. */
export async function preparedRun(on: AgentGate, key: string, options: { n?: number; prompt?: string; sandbox: string }) {
  const n = options.n ?? 1;
  const body = on.client.dispatchBody(`${key}-${n}-run`, { project_id: key, project_dir: key, model: 'scripted-model', sandbox: options.sandbox });
  const prompt = options.prompt ?? `Run the experiment. [${key}]`;
  const answer = await on.client.prepare({ run_id: body.run_id, project_id: key, project_dir: key, prompt_file: 'prompt.md', prompt_text: prompt, overwrite: true });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return body;
}

/** Dispatches the body; answers the run id. */
export async function dispatchedRun(on: AgentGate, body: Record<string, unknown>): Promise<string> {
  const answer = await on.client.dispatch(body);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return String(body.run_id);
}

/**
 * A shell command that leaves a process behind in a session of its own, named `marker` (which holds the gate fixture's
 * marker `rcp-linger-marker`), and returns only once that process runs: a tool that ends the process group of a
 * command it ran would otherwise take along one not yet moved out of it (a loaded machine may not have run it yet).
 */
export const leaveLingeringProcess = (marker: string) =>
  `(setsid bash -c 'exec -a ${marker} sleep 300' >/dev/null 2>&1 &) && until pgrep -f '^${marker} ' >/dev/null; do sleep 0.1; done`;

/** The gate's records of project `key`'s agent, under its state_dir (never in the project). */
export const agentRecordsOf = (on: AgentGate, key: string) => agentRecordsPath(join(on.fixture.dir, 'state'), join(realpathSync(on.fixture.projectRoot), key));

/** A file the launcher keeps in the gate's records of the project. */
export const agentRecord = (on: AgentGate, key: string, file: 'session.json' | 'events.jsonl' | 'stderr.log' | 'agent.log') => readFile(join(agentRecordsOf(on, key), file), 'utf8');

export const sessionRecord = async (on: AgentGate, key: string) => JSON.parse(await agentRecord(on, key, 'session.json'));

/** The evidence a finished study leaves, as files: run notes, one results file, the decision. */
export const EVIDENCE = [
  { path: 'run_notes.md', content: '# Run notes\nThe loss went down.\n' },
  { path: 'results/main/metrics.json', content: '{"accuracy": 0.91}\n' },
  { path: '.research/decision.json', content: '{"decision": "finalize_positive", "summary": "it worked"}\n' },
] as const;

/** One shell command that writes EVIDENCE. */
export const WRITE_EVIDENCE = [
  'mkdir -p results/main .research',
  ...EVIDENCE.map(({ path, content }) => `printf '%s' '${content}' > ${path}`),
].join(' && ');
