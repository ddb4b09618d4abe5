import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { ResumeRunRequest } from './contract/gate-endpoints.ts';
import { resumedRun, type GateRun } from './domain/gate-run.ts';
import { budgetLeftOf, CONTINUE_PREFIX, continuationsOf, continuePrompt } from './domain/evidence-gaps.ts';
import { HttpError } from '../platform/http/errors.ts';
import { randomToken, sha256Hex } from '../platform/http/tokens.ts';
import type { AgentSandbox } from './agent-sandbox/index.ts';
import { agentStartFor, type AgentStart } from './agent-start.ts';
import { runtimeFor, type WorkerGateConfig } from './gate-config.ts';
import type { GateEventLog } from './gate-event-log.ts';
import { readProcessTable } from './process-table.ts';
import { findTrackedProcesses, trackingTargetOf } from './process-tracking.ts';
import type { RunRecords } from './run-records.ts';
import { reapProcesses } from './stale-reaper.ts';
import { reopenRunCgroup, type RunCgroup } from './run-cgroups/index.ts';
import { confinementFor, pinProject, recordScriptStarted, runEnvironment, runScriptOf } from './run-launch.ts';
import { retakeConflict, slotHoldersOf } from './domain/run-placement.ts';

/** How long a resume waits for the asking session to end on its own (docs/worker-gate.md#resuming-a-run), and how often it looks. */
const ASKING_SESSION_END_MS = 15_000;
const ASKING_SESSION_POLL_MS = 100;


export interface ResumeResponse {
  ok: true;
  run_id: string;
  resume_id: string;
  gate_state: GateRun['gate_state'];
  already_resumed: boolean;
  resumes: number;
  root_pid: number | null;
}

export interface RunResumerOptions {
  config: WorkerGateConfig;
  logger: Logger;
  runs: RunRecords;
  events: GateEventLog;
  eventUrl: () => string;
  sandbox: AgentSandbox;
  /** Told just before the run's agent starts again: its transcript follows the new session's stream from there. */
  launching?: (runId: string, start: AgentStart) => void;
}

/** What a relaunch of the run's session starts with. */
interface Relaunch {
  resume_id: string;
  prompt: string;
  /** Tool rules for the next session only, and those the run keeps from now on. */
  once: string[];
  forRun: string[];
}

function resumeResponse(run: GateRun, resumeId: string, alreadyResumed: boolean): ResumeResponse {
  return { ok: true, run_id: run.run_id, resume_id: resumeId, gate_state: run.gate_state, already_resumed: alreadyResumed, resumes: run.resumes?.length ?? 0, root_pid: run.root_pid };
}

/** The states a run's session resumes from: it waits on an answer, or for the model's usage limit to reset. */
const RESUMABLE_STATES: ReadonlySet<GateRun['gate_state']> = new Set(['question_pending', 'usage_limited']);

/**
 * The run a resume is for, while it waits on an answer or a usage limit: 404 for an unknown run, the first answer again
 * for a resume_id already taken (409 with another prompt), 409 naming its state for a run waiting on neither.
 */
function waitingRun(run: GateRun | undefined, runId: string, resumeId: string, promptSha: string): GateRun | ResumeResponse {
  if (!run) throw new HttpError(404, `unknown run '${runId}': nothing runs for it here`);
  const earlier = run.resumes?.find((resume) => resume.resume_id === resumeId);
  if (earlier) {
    if (earlier.prompt_sha256 !== promptSha) throw new HttpError(409, `resume '${resumeId}' of run '${runId}' was already made with a different prompt`);
    return resumeResponse(run, resumeId, true);
  }
  if (!RESUMABLE_STATES.has(run.gate_state)) {
    throw new HttpError(409, `run '${runId}' is ${run.gate_state} (${run.gate_reason}), not waiting on an answer or a usage limit: there is nothing to resume`);
  }
  return run;
}

/**
 * Starts a run's agent session again (docs/worker-gate.md#resuming-a-run), in resume mode, in the run's cgroup, sandbox
 * and placement, with a new event token of its own: with the operator's answer (`resume`), or, after a premature stop,
 * with what the session left out (`continueSession`).
 */
export class RunResumer {
  /** A resume being made, per run: a second waits for it, then finds its resume_id recorded or the run no longer waiting. */
  private readonly inFlight = new Map<string, Promise<unknown>>();
  private readonly options: RunResumerOptions;

  constructor(options: RunResumerOptions) {
    this.options = options;
  }

  /** With an answer, or after a usage limit; once per resume_id: a repeated one answers what the first did. */
  resume(runId: string, request: ResumeRunRequest): Promise<ResumeResponse> {
    return this.oneAtATime(runId, () => this.resumeWithAnswer(runId, request));
  }

  /**
   * Resumes a run whose session ended without its evidence, with a prompt naming what is missing (`missing`). The run's
   * record says `continuing` until the session starts; a failure to start ends the run in error.
   */
  continueSession(run: GateRun, missing: readonly string[]): Promise<ResumeResponse> {
    const resumeId = `${CONTINUE_PREFIX}${continuationsOf(run) + 1}`;
    return this.oneAtATime(run.run_id, async () => {
      const prompt = continuePrompt(missing);
      this.options.events.append('continuing', run.run_id, { resume_id: resumeId, missing });
      return this.relaunch(this.options.runs.get(run.run_id) ?? run, null, { resume_id: resumeId, prompt, once: [], forRun: run.allowed_tools ?? [] });
    });
  }

  private async oneAtATime<T>(runId: string, work: () => Promise<T>): Promise<T> {
    // A loop, not one wait: two resumes that waited on the same one must not then run side by side.
    for (let earlier = this.inFlight.get(runId); earlier; earlier = this.inFlight.get(runId)) await earlier.catch(() => undefined);
    const promise = work();
    this.inFlight.set(runId, promise);
    try {
      return await promise;
    } finally {
      if (this.inFlight.get(runId) === promise) this.inFlight.delete(runId);
    }
  }

  private async resumeWithAnswer(runId: string, request: ResumeRunRequest): Promise<ResumeResponse> {
    const { runs } = this.options;
    const promptSha = sha256Hex(request.prompt);
    const asking = waitingRun(runs.get(runId), runId, request.resume_id, promptSha);
    if ('already_resumed' in asking) return asking;
    const cgroup = asking.cgroup ? reopenRunCgroup(asking.cgroup) : null;
    await this.untilAskingSessionEnds(asking, cgroup);
    // Read again: the asking session's end (with its tokens) came in meanwhile, or a cancel did.
    const run = waitingRun(runs.get(runId), runId, request.resume_id, promptSha);
    if ('already_resumed' in run) return run;
    if (run.gate_state === 'usage_limited' && run.usage_limit?.holds_slot === false) {
      const conflict = retakeConflict(run, slotHoldersOf(runs.all()), this.options.config.run_slots);
      if (conflict) throw new HttpError(409, `run '${runId}' let its slot go while it waited out a usage limit, and cannot take it back now: ${conflict}`);
    }
    const budgetLeft = budgetLeftOf(run);
    if (budgetLeft !== null && budgetLeft <= 0) {
      throw new HttpError(409, `run '${runId}' has spent its token budget (${run.token_usage?.total_tokens ?? 0} of ${run.token_budget} tokens): its session is not resumed`);
    }
    await this.stopAskingSession(run, cgroup);
    const once = request.allowed_tools.filter((tool) => tool.scope === 'once').map((tool) => tool.rule);
    const forRun = [...new Set([...(run.allowed_tools ?? []), ...request.allowed_tools.filter((tool) => tool.scope === 'run').map((tool) => tool.rule)])];
    return this.relaunch(run, cgroup, { resume_id: request.resume_id, prompt: request.prompt, once, forRun });
  }

  /** Runs the dispatch script again for the run's session, in resume mode; the record holds the resume before it starts. */
  private async relaunch(run: GateRun, knownCgroup: RunCgroup | null, relaunch: Relaunch): Promise<ResumeResponse> {
    const { config, runs, events, logger } = this.options;
    const cgroup = knownCgroup ?? (run.cgroup ? reopenRunCgroup(run.cgroup) : null);
    const runtime = runtimeFor(config, run.workload_class);
    const project = pinProject(config.project_root, run.project_dir);
    try {
      const start = agentStartFor(config, runtime, run.project_dir, { mode: 'resume', sandbox: run.sandbox });
      const confinement = confinementFor(this.options.sandbox, runtime === 'script' ? start.scriptPath : null, project, run.project_dir, run.prompt_file);
      const allowed = [...new Set([...relaunch.forRun, ...relaunch.once])];
      const eventToken = randomToken();
      const resume = { resume_id: relaunch.resume_id, at: new Date().toISOString(), prompt_sha256: sha256Hex(relaunch.prompt), allowed_tools: allowed };
      const resumed = runs.save(resumedRun(run, resume, sha256Hex(eventToken), relaunch.forRun));
      const env = this.options.sandbox.environment(
        process.env,
        {
          ...runEnvironment(resumed, { eventUrl: this.options.eventUrl(), eventToken, start, confinement, tokenBudget: budgetLeftOf(run) }),
          DISPATCH_MODE: 'resume',
          RESUME_PROMPT: relaunch.prompt,
          ...(allowed.length > 0 ? { ALLOWED_TOOLS: JSON.stringify(allowed) } : {}),
        },
        confinement.plan,
      );
      this.options.launching?.(run.run_id, start);
      const result = await runScriptOf(runs, resumed, { scriptPath: start.scriptPath, project, timeoutMs: config.dispatch_timeout_sec * 1000, cgroup, confinement, env });
      if (!result.ok) {
        runs.save({ ...(runs.get(run.run_id) ?? resumed), dispatch_status: 'started', gate_state: 'error', gate_reason: `the resume's dispatch script failed: ${result.detail.message}` });
        events.append('resume_failed', run.run_id, { resume_id: relaunch.resume_id, status: result.status, ...result.detail });
        logger.warn({ run_id: run.run_id, status: result.status, message: result.detail.message }, 'resume failed');
        throw new HttpError(result.status, result.detail);
      }
      const started = recordScriptStarted(runs, resumed, result);
      events.append('resumed', run.run_id, { resume_id: relaunch.resume_id, root_pid: started.root_pid, allowed_tools: allowed, duration_ms: result.duration_ms });
      logger.info({ run_id: run.run_id, resume_id: relaunch.resume_id, root_pid: started.root_pid }, 'run resumed');
      return resumeResponse(started, relaunch.resume_id, false);
    } finally {
      project.close();
    }
  }

  /**
   * Waits, ASKING_SESSION_END_MS at most, for the asking session's processes to exit. The hook's refusal told its agent
   * to end its turn, and a real tool's runner, as it exits, records the session that the resume continues
   * (session.json) and posts its end with its tokens: stopped before that, it would leave no session to resume, or the
   * project's previous one.
   */
  private async untilAskingSessionEnds(run: GateRun, cgroup: RunCgroup | null): Promise<void> {
    const deadline = Date.now() + ASKING_SESSION_END_MS;
    while (this.sessionPids(run, cgroup).length > 0 && Date.now() < deadline) await sleep(ASKING_SESSION_POLL_MS);
  }

  /** Stops what is left of the asking session past its time to end, before the resumed one starts. */
  private async stopAskingSession(run: GateRun, cgroup: RunCgroup | null): Promise<void> {
    const left = this.sessionPids(run, cgroup);
    if (left.length === 0) return;
    if (cgroup) await cgroup.kill();
    else {
      const victims = findTrackedProcesses(readProcessTable({ withCwd: true }), trackingTargetOf(run)).alive.filter((proc) => left.includes(proc.pid));
      await reapProcesses(victims, { termGraceSec: this.options.config.stale_project_process_term_grace_sec });
    }
    this.options.events.append('asking_session_stopped', run.run_id, { pids: left });
    this.options.logger.warn({ run_id: run.run_id, pids: left }, 'the asking session had not ended: stopped before the resume');
  }

  /** The run's live processes: its cgroup's members, or without one its tracked processes. */
  private sessionPids(run: GateRun, cgroup: RunCgroup | null): number[] {
    if (cgroup) return cgroup.pids();
    const tracked = findTrackedProcesses(readProcessTable({ withCwd: true }), trackingTargetOf(run));
    return tracked.alive.map((proc) => proc.pid).filter((pid) => pid !== process.pid && pid !== process.ppid);
  }
}
