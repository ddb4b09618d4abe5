#!/usr/bin/env -S node --import tsx
/**
 * Simulated agent: the dispatch script of a first-run config, so a new user sees a whole run
 * (dispatch, lifecycle events, evidence files) without a real agent installed.
 *
 * The worker gate runs this file directly (no shell) with cwd = project_dir and the environment of
 * docs/worker-gate.md#worker-gate (dispatch contract). Invoked that way it is the *launcher*: it starts itself again with `--agent`,
 * detached, its output going to `<project_dir>/.research/agent.log`, prints
 * `{"root_pid":…,"process_group_id":…}` and exits. In agent mode it posts session-start, "works" for
 * SIMULATED_AGENT_WORK_SEC seconds (default 3) in SIMULATED_AGENT_STEPS steps (default one a second), posting each
 * step's tool call and output for the run's transcript as a `progress` event, writes `run_notes.md`,
 * `results/simulated/metrics.json` and `.research/decision.json`, posts session-end and exits.
 *
 * Its decision is `inconclusive` unless the prompt asks for another with a `simulate:<decision>` token
 * (docs/papers.md#from-a-run-to-an-imported-paper): the prompt carries the project's title and hypothesis, so a project named
 * "… simulate:finalize_positive" ends positive, and its run can be taken through the paper pipeline.
 *
 * Missing or invalid environment: a message on stderr, exit 2. The event token is never printed.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import {
  AGENT_FLAG,
  checkWorkspaceOrExit,
  createEventPoster,
  dispatchEnvSchema,
  launchDetachedAgent,
  log,
  newSessionId,
  parseEnvOrExit,
  reportLaunched,
  sleep,
  writeFileAtomic,
  type DispatchEnv,
} from './agent-kit.ts';

const simulatedEnvSchema = z.object({
  SIMULATED_AGENT_WORK_SEC: z.coerce.number().min(0).max(3600).default(3),
  /** How many steps the work takes, each a tool call and its output in the run's transcript; one per second of work when unset. */
  SIMULATED_AGENT_STEPS: z.coerce.number().int().min(1).max(100_000).optional(),
});

/** Decisions a prompt may ask the simulated agent for. */
export const SIMULATED_DECISIONS = ['finalize_positive', 'negative', 'inconclusive'] as const;
type SimulatedDecision = (typeof SIMULATED_DECISIONS)[number];

/** The decision the prompt asks for with `simulate:<decision>`, or inconclusive. */
export function simulatedDecisionOf(prompt: string): SimulatedDecision {
  const asked = /\bsimulate:([a-z_]+)/.exec(prompt)?.[1];
  return SIMULATED_DECISIONS.find((decision) => decision === asked) ?? 'inconclusive';
}

/** A deterministic "score" in [0, 1) seeded by the run id, so a run's metrics are reproducible. */
function seededScore(runId: string): number {
  return createHash('sha256').update(runId).digest().readUInt32BE(0) / 2 ** 32;
}

async function runAgent(env: DispatchEnv, workSec: number, stepCount: number | undefined): Promise<void> {
  const started = new Date();
  const poster = createEventPoster(env, newSessionId('sim', env.RUN_ID));
  const resumed = env.DISPATCH_MODE === 'resume';
  log(`simulated agent pid ${process.pid}, run ${env.RUN_ID}, session ${poster.sessionId}, mode ${env.DISPATCH_MODE}`);
  process.on('SIGTERM', () => {
    log('received SIGTERM, stopping');
    process.exit(143);
  });

  await poster.post('session-start', `simulated agent ${resumed ? 'resumed' : 'started'} (${env.DISPATCH_MODE})`);

  const promptPath = resolve(env.PROJECT_DIR, env.PROMPT_FILE);
  let prompt = '';
  let promptProblem = '';
  try {
    prompt = await readFile(promptPath, 'utf8');
  } catch (error) {
    promptProblem = error instanceof Error ? error.message : String(error);
    log(`could not read the prompt file: ${promptProblem}`);
  }
  const firstLine = prompt.split(/\r?\n/).find((line) => line.trim() !== '')?.trim() ?? '';

  const steps = stepCount ?? Math.max(1, Math.ceil(workSec));
  await poster.post('progress', 'read the prompt', {
    transcript: [{ kind: 'message', text: `I read the prompt${firstLine ? `: ${firstLine}` : ''}. I will work in ${steps} step(s).` }],
  });
  for (let step = 1; step <= steps; step += 1) {
    log(`working: step ${step} of ${steps}`);
    await sleep((workSec * 1000) / steps);
    await poster.post('progress', `step ${step} of ${steps}`, {
      transcript: [
        { kind: 'tool_call', tool: 'simulated_shell', text: `python experiment.py --step ${step}` },
        { kind: 'tool_output', tool: 'simulated_shell', text: `step ${step} of ${steps}: simulated, no experiment ran` },
      ],
    });
  }

  const score = Number(seededScore(env.RUN_ID).toFixed(4));
  const decided = simulatedDecisionOf(prompt);
  const metrics = {
    simulated: true,
    run_id: env.RUN_ID,
    project_id: env.PROJECT_ID,
    dispatch_mode: env.DISPATCH_MODE,
    score,
    // A made-up baseline below the score, so a positive simulated run has something to beat.
    baseline_score: Number((score * 0.9).toFixed(4)),
    steps,
    work_sec: workSec,
  };
  await writeFileAtomic(join(env.PROJECT_DIR, 'results', 'simulated', 'metrics.json'), `${JSON.stringify(metrics, null, 2)}\n`);

  const notesPath = join(env.PROJECT_DIR, 'run_notes.md');
  const section = [
    resumed ? `## Resumed session ${poster.sessionId}` : `# Run notes: ${env.RUN_ID}`,
    '',
    resumed
      ? `The simulated agent resumed run \`${env.RUN_ID}\` (DISPATCH_MODE=resume) and continued the work.`
      : `The simulated agent ran run \`${env.RUN_ID}\` for project \`${env.PROJECT_ID}\` (DISPATCH_MODE=exec).`,
    '',
    `- Started: ${started.toISOString()}`,
    `- Finished: ${new Date().toISOString()}`,
    `- Session: ${poster.sessionId}`,
    `- Model: ${env.MODEL || '(none)'}, reasoning effort: ${env.REASONING_EFFORT}, sandbox: ${env.SANDBOX || '(none)'}`,
    `- Prompt file: ${env.PROMPT_FILE}`,
    promptProblem
      ? `- Prompt: could not be read (${promptProblem})`
      : `- Prompt, first line: ${firstLine || '(empty prompt)'}`,
    `- Work: ${steps} simulated step(s) over ${workSec} s; no real experiment was run.`,
    `- Results: results/simulated/metrics.json (score ${score}, deterministic from the run id).`,
    decided === 'inconclusive'
      ? '- Decision: inconclusive, since this is a simulation (.research/decision.json).'
      : `- Decision: ${decided}, as the prompt asked (simulate:${decided}); this is a simulation (.research/decision.json).`,
    '',
  ].join('\n');
  let previousNotes = '';
  if (resumed) previousNotes = await readFile(notesPath, 'utf8').catch(() => '');
  await writeFileAtomic(notesPath, previousNotes ? `${previousNotes.replace(/\n*$/, '\n\n')}${section}` : section);

  const decision = {
    decision: decided,
    summary: `Simulated run ${env.RUN_ID}${resumed ? ' (resumed)' : ''}: no real agent ran; simulated score ${score} against baseline ${metrics.baseline_score}.`,
  };
  await writeFileAtomic(join(env.PROJECT_DIR, '.research', 'decision.json'), `${JSON.stringify(decision, null, 2)}\n`);

  await poster.post('session-end', `simulated agent finished: decision ${decided}, score ${score}`);
  log('done');
}

async function main(): Promise<void> {
  const env = parseEnvOrExit(dispatchEnvSchema, process.env, 'simulated-agent');
  const { SIMULATED_AGENT_WORK_SEC: workSec, SIMULATED_AGENT_STEPS: steps } = parseEnvOrExit(simulatedEnvSchema, process.env, 'simulated-agent');
  if (process.argv.includes(AGENT_FLAG)) {
    await runAgent(env, workSec, steps);
    process.exit(0);
  }
  checkWorkspaceOrExit(env, 'simulated-agent');
  reportLaunched(launchDetachedAgent(fileURLToPath(import.meta.url), env.PROJECT_DIR));
}

main().catch((error: unknown) => {
  process.stderr.write(`simulated-agent: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
