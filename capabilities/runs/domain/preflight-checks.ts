import { z } from 'zod';

/**
 * Worker preflight (docs/runs.md#runs, step 2): checks that a worker gate is reachable,
 * accepts our token, can call us back, and has GPU and memory headroom, without committing a dispatch. Pure.
 */

export const PREFLIGHT_CHECK_NAMES = [
  'control_queue_paused',
  'control_maintenance_mode',
  'wake_gate_healthz',
  'wake_gate_dashboard_api',
  'worker_gpu_idle',
  'worker_memory_available',
  'worker_no_live_runs',
  'worker_callback_token_compatible',
  'worker_agent_isolation',
  'worker_capacity_matches',
] as const;
export type PreflightCheckName = (typeof PREFLIGHT_CHECK_NAMES)[number];

export interface PreflightCheck {
  name: PreflightCheckName;
  ok: boolean;
  /** One readable sentence. */
  detail: string;
  data: Record<string, unknown>;
}

/** WorkerPreflightResponse. */
export interface PreflightResult {
  ok: boolean;
  /** The worker target name, or the URL when the request named no configured target. */
  target: string;
  summary: string;
  checks: PreflightCheck[];
}

export const PREFLIGHT_DEFAULTS = {
  require_paused: true,
  strict: false,
  max_gpu_pct: 5,
  min_memory_available_mib: 16384,
} as const;

/** Checks a live dispatch requires: the run itself is impossible without them. Resource headroom is reported, not required. */
export const DISPATCH_REQUIRED_CHECKS: readonly PreflightCheckName[] = [
  'control_maintenance_mode',
  'wake_gate_healthz',
  'wake_gate_dashboard_api',
  'worker_callback_token_compatible',
];

/** One call to the gate: its status and body, or status null and why no answer came. */
export interface GateObservation {
  status: number | null;
  body: unknown;
  error?: string;
  ms?: number;
}

export interface PreflightObservations {
  flags: { queue_paused: boolean; maintenance_mode: boolean };
  healthz: GateObservation;
  /** Null when not attempted (the gate did not answer /healthz). */
  dashboard: GateObservation | null;
  /** sha256 hex of our completion_callback_token, to compare with the gate's. */
  expectedCallbackFingerprint: string;
}

export interface PreflightOptions {
  require_paused: boolean;
  strict: boolean;
  max_gpu_pct: number;
  min_memory_available_mib: number;
  /** When given, ok = every listed check passed (overrides the strict/non-strict rule); a listed check not run fails. */
  required?: readonly PreflightCheckName[];
  /** What the target declares (docs/runs.md#slots-and-gpus); absent: one slot, all GPUs. */
  capacity?: { slots: number; gpus: 'all' | readonly number[] };
}

// The gate is another machine: every field is optional and a wrong type reads as absent, so parsing never throws.
const lenient = <T extends z.ZodType>(schema: T) => schema.optional().catch(undefined);
const figure = lenient(z.number().nullable());

const HealthzBodySchema = z
  .object({
    ok: lenient(z.boolean()),
    ready: lenient(z.boolean()),
    // A process serving both roles nests the gate's readiness.
    worker_gate: lenient(z.object({ ready: lenient(z.boolean()) })),
  })
  .catch({});

const DashboardBodySchema = z
  .object({
    service: lenient(
      z.object({
        completion_callback_token_fingerprint: lenient(z.string()),
        agent_isolation: lenient(z.object({ mode: lenient(z.string()), sandboxed: lenient(z.boolean()), runs_as: lenient(z.string()), summary: lenient(z.string()) })),
      }),
    ),
    totals: lenient(
      z.object({
        active_or_waiting: lenient(z.number().int().min(0)),
        live: lenient(z.number().int().min(0)),
        callback_pending: lenient(z.number().int().min(0)),
      }),
    ),
    capacity: lenient(
      z.object({
        slots: lenient(z.number().int().min(1)),
        slots_held: lenient(z.number().int().min(0)),
        gpus: lenient(z.array(z.object({ index: z.number().int(), offered: lenient(z.boolean()) }))),
      }),
    ),
    telemetry: lenient(
      z.object({
        cpu_pct: figure,
        gpu_pct: figure,
        gpu_source: lenient(z.string()),
        gpu_compute_pids: lenient(z.array(z.number())),
        vram_used_mib: figure,
        memory_available_mib: figure,
        memory_source: lenient(z.string().nullable()),
      }),
    ),
  })
  .catch({});

type DashboardBody = z.output<typeof DashboardBodySchema>;

const check = (name: PreflightCheckName, ok: boolean, detail: string, data: Record<string, unknown> = {}): PreflightCheck => ({
  name,
  ok,
  detail,
  data,
});

function healthzCheck(healthz: GateObservation): PreflightCheck {
  const data = { status: healthz.status, ms: healthz.ms ?? null };
  if (healthz.status === null) return check('wake_gate_healthz', false, `the gate did not answer: ${healthz.error ?? 'no response'}`, data);
  const body = HealthzBodySchema.parse(healthz.body);
  const ready = body.ready ?? body.worker_gate?.ready;
  if (healthz.status === 200 && body.ok === true && ready === true) return check('wake_gate_healthz', true, 'the gate is up and ready', data);
  if (healthz.status === 503) return check('wake_gate_healthz', false, 'the gate answered 503: it is still starting', data);
  if (healthz.status === 200) return check('wake_gate_healthz', false, 'the gate answered 200 but did not report ok and ready (is this a worker gate?)', data);
  return check('wake_gate_healthz', false, `the gate answered ${healthz.status} to /healthz`, data);
}

/** Why the dashboard body is unusable, or null when it answered 200. */
function dashboardFailure(dashboard: GateObservation | null): string | null {
  if (dashboard === null) return '/dashboard/api was not called because the gate did not answer /healthz';
  if (dashboard.status === null) return `the gate did not answer /dashboard/api: ${dashboard.error ?? 'no response'}`;
  if (dashboard.status === 401) return 'the gate refused the bearer token (401 from /dashboard/api)';
  if (dashboard.status !== 200) return `the gate answered ${dashboard.status} to /dashboard/api`;
  return null;
}

function dashboardCheck(dashboard: GateObservation | null): PreflightCheck {
  const failure = dashboardFailure(dashboard);
  const data = { status: dashboard?.status ?? null, ms: dashboard?.ms ?? null };
  return failure === null ? check('wake_gate_dashboard_api', true, 'the gate accepted the bearer token', data) : check('wake_gate_dashboard_api', false, failure, data);
}

function gpuCheck(body: DashboardBody, maxGpuPct: number): PreflightCheck {
  const telemetry = body.telemetry;
  const data = { gpu_pct: telemetry?.gpu_pct ?? null, max_gpu_pct: maxGpuPct, gpu_compute_pids: telemetry?.gpu_compute_pids ?? null };
  if (telemetry?.gpu_pct === undefined) return check('worker_gpu_idle', false, 'the gate reported no usable telemetry.gpu_pct', data);
  if (telemetry.gpu_pct === null) {
    // Matches the gate's own quiet window: nvidia-smi present but without figures means unknown, not idle.
    if (telemetry.gpu_source === 'nvidia-smi') return check('worker_gpu_idle', false, 'nvidia-smi gave no utilisation figure, so the GPU may be busy', data);
    return check('worker_gpu_idle', true, 'no GPU telemetry (no GPU tool on the worker)', data);
  }
  const ok = telemetry.gpu_pct <= maxGpuPct;
  return check('worker_gpu_idle', ok, `GPU at ${telemetry.gpu_pct}% (limit ${maxGpuPct}%)`, data);
}

function memoryCheck(body: DashboardBody, floorMib: number): PreflightCheck {
  const available = body.telemetry?.memory_available_mib ?? null;
  const data = { memory_available_mib: available, min_memory_available_mib: floorMib, memory_source: body.telemetry?.memory_source ?? null };
  if (available === null) return check('worker_memory_available', false, 'the gate reported no memory_available_mib', data);
  const ok = available >= floorMib;
  return check('worker_memory_available', ok, `${available} MiB available (floor ${floorMib} MiB)`, data);
}

function liveRunsCheck(body: DashboardBody, slots: number): PreflightCheck {
  const totals = body.totals;
  const data = { live: totals?.live ?? null, active_or_waiting: totals?.active_or_waiting ?? null, callback_pending: totals?.callback_pending ?? null };
  // A target of several slots is meant to run several at once: what matters is a free one.
  const held = body.capacity?.slots_held;
  if (slots > 1 && held !== undefined) {
    return check('worker_no_live_runs', held < slots, `${held} of its ${slots} slots hold runs${held < slots ? '' : ': none is free'}`, { ...data, slots, slots_held: held });
  }
  if (totals?.live === undefined) return check('worker_no_live_runs', false, 'the gate reported no usable totals.live', data);
  if (totals.live === 0) return check('worker_no_live_runs', true, 'no run has live processes on the worker', data);
  return check('worker_no_live_runs', false, `${totals.live} run(s) still have live processes on the worker`, data);
}

function callbackTokenCheck(body: DashboardBody, expectedFingerprint: string): PreflightCheck {
  const reported = body.service?.completion_callback_token_fingerprint;
  if (reported === undefined) {
    return check('worker_callback_token_compatible', false, 'the gate reported no completion_callback_token_fingerprint', { fingerprint_reported: false });
  }
  const ok = reported.toLowerCase() === expectedFingerprint.toLowerCase();
  return check(
    'worker_callback_token_compatible',
    ok,
    ok ? "the gate's completion_callback_token matches ours" : "the gate's completion_callback_token differs from ours: its callbacks would be refused",
    { fingerprint_reported: true, matches: ok },
  );
}

/** Fails when the gate's agents would run unsandboxed: they could read the gate's config, its state and other projects. */
function agentIsolationCheck(body: DashboardBody): PreflightCheck {
  const isolation = body.service?.agent_isolation;
  const data = { mode: isolation?.mode ?? null, sandboxed: isolation?.sandboxed ?? null, runs_as: isolation?.runs_as ?? null };
  if (isolation?.sandboxed === undefined) return check('worker_agent_isolation', false, 'the gate reported no agent_isolation (a gate older than the agent sandbox runs agents unsandboxed)', data);
  return check('worker_agent_isolation', isolation.sandboxed, isolation.summary ?? (isolation.sandboxed ? 'agents run sandboxed' : 'agents run unsandboxed'), data);
}

/**
 * Whether the gate holds what the target declares (docs/runs.md#slots-and-gpus): as many slots (its run_slots), and
 * every GPU the target names among those it offers. The control plane places runs by what the gate reports, so a
 * disagreement is said here rather than found out by a refused dispatch.
 */
function capacityCheck(body: DashboardBody, declared: { slots: number; gpus: 'all' | readonly number[] }): PreflightCheck {
  const reported = body.capacity;
  const offered = reported?.gpus?.filter((gpu) => gpu.offered !== false).map((gpu) => gpu.index) ?? null;
  const data = { slots: declared.slots, gate_slots: reported?.slots ?? null, gpus: declared.gpus, gate_gpus: offered };
  if (reported?.slots === undefined) {
    const single = declared.slots === 1 && declared.gpus === 'all';
    const detail = single ? 'the gate reports no capacity (a gate older than slots): one run at a time' : `the target declares ${declared.slots} slot(s), but its gate reports no capacity (a gate older than slots)`;
    return check('worker_capacity_matches', single, detail, data);
  }
  const problems: string[] = [];
  if (reported.slots !== declared.slots) problems.push(`the target declares ${declared.slots} slot(s) and its gate holds ${reported.slots} (run_slots)`);
  if (declared.gpus !== 'all') {
    const missing = declared.gpus.filter((index) => !(offered ?? []).includes(index));
    if (missing.length > 0) problems.push(`GPU ${missing.join(', ')} of the target's gpus ${missing.length === 1 ? 'is' : 'are'} not offered by its gate`);
  }
  if (problems.length > 0) return check('worker_capacity_matches', false, problems.join('; '), data);
  return check('worker_capacity_matches', true, `${declared.slots} slot(s) and ${offered?.length ?? 0} GPU(s) offered, as the target declares`, data);
}

/** The checks that read the dashboard body, each failing with the same reason when there is no body. */
function workerChecks(observed: PreflightObservations, options: PreflightOptions): PreflightCheck[] {
  const failure = dashboardFailure(observed.dashboard);
  if (failure !== null) {
    const names = ['worker_gpu_idle', 'worker_memory_available', 'worker_no_live_runs', 'worker_callback_token_compatible', 'worker_agent_isolation', 'worker_capacity_matches'] as const;
    return names.map((name) => check(name, false, `unknown: ${failure}`));
  }
  const body = DashboardBodySchema.parse(observed.dashboard?.body);
  const declared = options.capacity ?? { slots: 1, gpus: 'all' as const };
  return [
    gpuCheck(body, options.max_gpu_pct),
    memoryCheck(body, options.min_memory_available_mib),
    liveRunsCheck(body, declared.slots),
    callbackTokenCheck(body, observed.expectedCallbackFingerprint),
    agentIsolationCheck(body),
    capacityCheck(body, declared),
  ];
}

function controlChecks(flags: PreflightObservations['flags'], requirePaused: boolean): PreflightCheck[] {
  const checks: PreflightCheck[] = [];
  if (requirePaused) {
    checks.push(
      check(
        'control_queue_paused',
        flags.queue_paused,
        flags.queue_paused ? 'the queue is paused' : 'the queue is not paused (require_paused is true)',
        { queue_paused: flags.queue_paused },
      ),
    );
  }
  checks.push(
    check(
      'control_maintenance_mode',
      !flags.maintenance_mode,
      flags.maintenance_mode ? 'maintenance mode is on' : 'maintenance mode is off',
      { maintenance_mode: flags.maintenance_mode },
    ),
  );
  return checks;
}

function requiredNames(options: PreflightOptions, checks: readonly PreflightCheck[]): readonly PreflightCheckName[] {
  if (options.required) return options.required;
  if (options.strict) return checks.map((c) => c.name);
  return options.require_paused ? ['control_queue_paused', 'wake_gate_healthz'] : ['wake_gate_healthz'];
}

function summaryOf(target: string, ok: boolean, checks: readonly PreflightCheck[], blocking: readonly PreflightCheck[]): string {
  const failed = checks.filter((c) => !c.ok);
  const passed = `${checks.length - failed.length}/${checks.length} checks passed`;
  if (ok) {
    const advisory = failed.length > 0 ? ` (not required: ${failed.map((c) => c.name).join(', ')} failed)` : '';
    return `worker ${target} ready: ${passed}${advisory}`;
  }
  const [first, ...others] = blocking;
  const rest = others.length > 0 ? `; also failed: ${others.map((c) => c.name).join(', ')}` : '';
  return `worker ${target} not ready: ${first?.name ?? 'a required check'} failed (${first?.detail ?? 'not run'})${rest}`;
}

/** Evaluates what was observed of the control plane and one worker gate (docs/runs.md#runs, step 2). */
export function evaluatePreflight(target: string, observed: PreflightObservations, options: PreflightOptions): PreflightResult {
  const checks = [
    ...controlChecks(observed.flags, options.require_paused),
    healthzCheck(observed.healthz),
    dashboardCheck(observed.dashboard),
    ...workerChecks(observed, options),
  ];
  const byName = new Map(checks.map((c) => [c.name, c]));
  const blocking = requiredNames(options, checks).map(
    (name) => byName.get(name) ?? check(name, false, 'this check was required but not run'),
  ).filter((c) => !c.ok);
  const ok = blocking.length === 0;
  return { ok, target, summary: summaryOf(target, ok, checks, blocking), checks };
}
