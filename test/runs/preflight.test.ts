import { describe, expect, it } from 'vitest';
import {
  DISPATCH_REQUIRED_CHECKS,
  evaluatePreflight,
  PREFLIGHT_CHECK_NAMES,
  PREFLIGHT_DEFAULTS,
  type PreflightCheckName,
  type PreflightObservations,
  type PreflightOptions,
  type PreflightResult,
} from '../../capabilities/runs/domain/preflight-checks.ts';

const FINGERPRINT = 'a'.repeat(64);

const ISOLATED = { mode: 'isolated', sandboxed: true, runs_as: 'rcp-agent', summary: 'agents run as rcp-agent in a bwrap sandbox' };

function dashboardBody(
  overrides: { telemetry?: Record<string, unknown>; totals?: Record<string, unknown>; fingerprint?: string; isolation?: Record<string, unknown> } = {},
) {
  return {
    ok: true,
    service: { completion_callback_token_fingerprint: overrides.fingerprint ?? FINGERPRINT, agent_isolation: overrides.isolation ?? ISOLATED },
    totals: { runs: 0, active_or_waiting: 0, live: 0, callback_pending: 0, ...overrides.totals },
    telemetry: {
      cpu_pct: 2,
      gpu_pct: 3,
      gpu_source: 'nvidia-smi',
      gpu_compute_pids: [],
      vram_used_mib: 1024,
      memory_available_mib: 65536,
      memory_source: 'MemAvailable+SwapFree',
      ...overrides.telemetry,
    },
    runs: [],
    events: [],
  };
}

function healthy(overrides: Partial<PreflightObservations> = {}): PreflightObservations {
  return {
    flags: { queue_paused: true, maintenance_mode: false },
    healthz: { status: 200, body: { ok: true, service: 'worker-gate', ready: true }, ms: 4 },
    dashboard: { status: 200, body: dashboardBody(), ms: 9 },
    expectedCallbackFingerprint: FINGERPRINT,
    ...overrides,
  };
}

const defaults: PreflightOptions = { ...PREFLIGHT_DEFAULTS };
const strict: PreflightOptions = { ...PREFLIGHT_DEFAULTS, strict: true };

function checkOf(result: PreflightResult, name: PreflightCheckName) {
  const found = result.checks.find((c) => c.name === name);
  if (!found) throw new Error(`no ${name} check in ${JSON.stringify(result.checks.map((c) => c.name))}`);
  return found;
}

const failedNames = (result: PreflightResult) => result.checks.filter((c) => !c.ok).map((c) => c.name);

describe('evaluatePreflight on a healthy worker', () => {
  it('passes every check, in the documented order, in both modes', () => {
    for (const options of [defaults, strict]) {
      const result = evaluatePreflight('default', healthy(), options);
      expect(result.ok).toBe(true);
      expect(result.target).toBe('default');
      expect(result.checks.map((c) => c.name)).toEqual([...PREFLIGHT_CHECK_NAMES]);
      expect(failedNames(result)).toEqual([]);
      expect(result.summary).toBe('worker default ready: 10/10 checks passed');
      for (const c of result.checks) expect(c.detail.length).toBeGreaterThan(0);
    }
  });

  it('carries the figures in data', () => {
    const result = evaluatePreflight('gpu-a', healthy(), strict);
    expect(checkOf(result, 'wake_gate_healthz').data).toEqual({ status: 200, ms: 4 });
    expect(checkOf(result, 'wake_gate_dashboard_api').data).toEqual({ status: 200, ms: 9 });
    expect(checkOf(result, 'worker_gpu_idle').data).toMatchObject({ gpu_pct: 3, max_gpu_pct: 5 });
    expect(checkOf(result, 'worker_memory_available').data).toMatchObject({ memory_available_mib: 65536, min_memory_available_mib: 16384 });
    expect(checkOf(result, 'worker_no_live_runs').data).toMatchObject({ live: 0, active_or_waiting: 0, callback_pending: 0 });
    expect(checkOf(result, 'control_queue_paused').data).toEqual({ queue_paused: true });
    expect(checkOf(result, 'control_maintenance_mode').data).toEqual({ maintenance_mode: false });
  });

  it('never reveals either fingerprint', () => {
    const result = evaluatePreflight('default', healthy({ dashboard: { status: 200, body: dashboardBody({ fingerprint: 'b'.repeat(64) }) } }), strict);
    expect(JSON.stringify(result)).not.toContain('a'.repeat(64));
    expect(JSON.stringify(result)).not.toContain('b'.repeat(64));
  });
});

describe('control checks', () => {
  it('lists control_queue_paused only when require_paused is true', () => {
    const result = evaluatePreflight('default', healthy(), { ...defaults, require_paused: false });
    expect(result.checks.map((c) => c.name)).not.toContain('control_queue_paused');
    expect(result.checks).toHaveLength(9);
    expect(result.summary).toBe('worker default ready: 9/9 checks passed');
  });

  it('fails require_paused on an unpaused queue, also in non-strict mode', () => {
    const result = evaluatePreflight('default', healthy({ flags: { queue_paused: false, maintenance_mode: false } }), defaults);
    expect(result.ok).toBe(false);
    expect(checkOf(result, 'control_queue_paused')).toMatchObject({ ok: false, data: { queue_paused: false } });
    expect(result.summary).toMatch(/^worker default not ready: control_queue_paused failed \(the queue is not paused/);
  });

  it('fails control_maintenance_mode while maintenance is on; only strict mode requires it', () => {
    const observed = healthy({ flags: { queue_paused: true, maintenance_mode: true } });
    expect(checkOf(evaluatePreflight('default', observed, defaults), 'control_maintenance_mode').ok).toBe(false);
    expect(evaluatePreflight('default', observed, defaults).ok).toBe(true);
    expect(evaluatePreflight('default', observed, strict).ok).toBe(false);
  });
});

describe('wake_gate_healthz', () => {
  it('explains a gate that did not answer, and skips nothing silently', () => {
    const observed = healthy({ healthz: { status: null, body: null, error: 'connection refused (connect ECONNREFUSED 127.0.0.1:9)' }, dashboard: null });
    const result = evaluatePreflight('default', observed, defaults);
    expect(result.ok).toBe(false);
    expect(checkOf(result, 'wake_gate_healthz').detail).toContain('connection refused');
    expect(checkOf(result, 'wake_gate_healthz').data).toEqual({ status: null, ms: null });
    expect(checkOf(result, 'wake_gate_dashboard_api')).toMatchObject({ ok: false, data: { status: null } });
    expect(checkOf(result, 'wake_gate_dashboard_api').detail).toContain('not called');
    expect(result.summary).toBe(
      'worker default not ready: wake_gate_healthz failed (the gate did not answer: connection refused (connect ECONNREFUSED 127.0.0.1:9))',
    );
    expect(result.checks).toHaveLength(10);
    expect(evaluatePreflight('default', observed, strict).summary).toMatch(
      /^worker default not ready: wake_gate_healthz failed \(.*connection refused.*\); also failed: wake_gate_dashboard_api, worker_gpu_idle, /,
    );
  });

  it('fails on 503 while the gate starts', () => {
    const result = evaluatePreflight('default', healthy({ healthz: { status: 503, body: { ok: false, ready: false } } }), defaults);
    expect(result.ok).toBe(false);
    expect(checkOf(result, 'wake_gate_healthz').detail).toContain('starting');
  });

  it('needs ok and ready in a 200 body, accepting the readiness a two-role process nests', () => {
    const notReady = evaluatePreflight('default', healthy({ healthz: { status: 200, body: { ok: true } } }), defaults);
    expect(checkOf(notReady, 'wake_gate_healthz').ok).toBe(false);
    const notOk = evaluatePreflight('default', healthy({ healthz: { status: 200, body: { ok: false, ready: true } } }), defaults);
    expect(checkOf(notOk, 'wake_gate_healthz').ok).toBe(false);
    const nested = evaluatePreflight('default', healthy({ healthz: { status: 200, body: { ok: true, worker_gate: { ready: true } } } }), defaults);
    expect(checkOf(nested, 'wake_gate_healthz').ok).toBe(true);
  });

  it('survives odd healthz bodies', () => {
    for (const body of [null, 'ok', 42, [], { ok: 'yes', ready: 1 }, { worker_gate: 'ready' }]) {
      const result = evaluatePreflight('default', healthy({ healthz: { status: 200, body } }), defaults);
      expect(checkOf(result, 'wake_gate_healthz').ok).toBe(false);
      expect(result.ok).toBe(false);
    }
  });
});

describe('wake_gate_dashboard_api and the checks that read its body', () => {
  const dependents: PreflightCheckName[] = ['worker_gpu_idle', 'worker_memory_available', 'worker_no_live_runs', 'worker_callback_token_compatible', 'worker_agent_isolation'];

  it('says the bearer token was refused on 401, and the dependent checks fail with that reason', () => {
    const result = evaluatePreflight('default', healthy({ dashboard: { status: 401, body: { detail: 'invalid bearer token' }, ms: 2 } }), strict);
    const dashboard = checkOf(result, 'wake_gate_dashboard_api');
    expect(dashboard).toMatchObject({ ok: false, data: { status: 401, ms: 2 } });
    expect(dashboard.detail).toContain('refused the bearer token');
    for (const name of dependents) {
      expect(checkOf(result, name).ok).toBe(false);
      expect(checkOf(result, name).detail).toContain('refused the bearer token');
    }
    expect(result.ok).toBe(false);
  });

  it('does not require the dashboard in non-strict mode', () => {
    const result = evaluatePreflight('default', healthy({ dashboard: { status: 500, body: 'boom' } }), defaults);
    expect(result.ok).toBe(true);
    expect(checkOf(result, 'wake_gate_dashboard_api').detail).toContain('500');
    expect(result.summary).toMatch(/^worker default ready: 3\/10 checks passed \(not required: wake_gate_dashboard_api, /);
  });

  it('explains a dashboard call that got no answer', () => {
    const result = evaluatePreflight('default', healthy({ dashboard: { status: null, body: null, error: 'no answer within 5000 ms' } }), strict);
    expect(checkOf(result, 'wake_gate_dashboard_api').detail).toContain('no answer within 5000 ms');
    expect(checkOf(result, 'worker_no_live_runs').detail).toContain('no answer within 5000 ms');
  });

  it('never throws on odd dashboard bodies; what cannot be read fails', () => {
    for (const body of [null, 'text', 7, [], { service: [], totals: 'x', telemetry: null }, { totals: { live: -1 }, telemetry: { gpu_pct: '3', memory_available_mib: {} } }]) {
      const result = evaluatePreflight('default', healthy({ dashboard: { status: 200, body } }), strict);
      expect(result.ok).toBe(false);
      expect(checkOf(result, 'wake_gate_dashboard_api').ok).toBe(true);
      for (const name of dependents) expect(checkOf(result, name).ok).toBe(false);
    }
  });

  it('reads the fields it needs even when others are malformed', () => {
    const body = { ...dashboardBody(), service: { completion_callback_token_fingerprint: FINGERPRINT, agent_isolation: ISOLATED, name: 42 }, runs: 'not a list' };
    const result = evaluatePreflight('default', healthy({ dashboard: { status: 200, body } }), strict);
    expect(result.ok).toBe(true);
  });
});

describe('worker headroom checks', () => {
  const withTelemetry = (telemetry: Record<string, unknown>) => healthy({ dashboard: { status: 200, body: dashboardBody({ telemetry }) } });

  it('worker_gpu_idle: at or below max_gpu_pct passes, above fails', () => {
    expect(checkOf(evaluatePreflight('d', withTelemetry({ gpu_pct: 5 }), strict), 'worker_gpu_idle').ok).toBe(true);
    const busy = evaluatePreflight('d', withTelemetry({ gpu_pct: 40 }), strict);
    expect(checkOf(busy, 'worker_gpu_idle')).toMatchObject({ ok: false, data: { gpu_pct: 40, max_gpu_pct: 5 } });
    expect(checkOf(busy, 'worker_gpu_idle').detail).toBe('GPU at 40% (limit 5%)');
    expect(busy.ok).toBe(false);
    expect(checkOf(evaluatePreflight('d', withTelemetry({ gpu_pct: 40 }), { ...strict, max_gpu_pct: 50 }), 'worker_gpu_idle').ok).toBe(true);
  });

  it('worker_gpu_idle: no GPU tool passes; nvidia-smi without a figure fails as unknown', () => {
    const noGpu = checkOf(evaluatePreflight('d', withTelemetry({ gpu_pct: null, gpu_source: 'none' }), strict), 'worker_gpu_idle');
    expect(noGpu).toMatchObject({ ok: true, data: { gpu_pct: null } });
    expect(noGpu.detail).toContain('no GPU telemetry');
    const unknown = checkOf(evaluatePreflight('d', withTelemetry({ gpu_pct: null, gpu_source: 'nvidia-smi' }), strict), 'worker_gpu_idle');
    expect(unknown.ok).toBe(false);
  });

  it('worker_memory_available: at the floor passes, below or missing fails', () => {
    const floor = { ...strict, min_memory_available_mib: 8192 };
    expect(checkOf(evaluatePreflight('d', withTelemetry({ memory_available_mib: 8192 }), floor), 'worker_memory_available').ok).toBe(true);
    const low = checkOf(evaluatePreflight('d', withTelemetry({ memory_available_mib: 8191 }), floor), 'worker_memory_available');
    expect(low).toMatchObject({ ok: false, data: { memory_available_mib: 8191, min_memory_available_mib: 8192 } });
    expect(checkOf(evaluatePreflight('d', withTelemetry({ memory_available_mib: null }), floor), 'worker_memory_available').ok).toBe(false);
  });

  it('worker_no_live_runs: passes only when totals.live is 0', () => {
    const busy = healthy({ dashboard: { status: 200, body: dashboardBody({ totals: { live: 2 } }) } });
    const result = evaluatePreflight('d', busy, strict);
    expect(checkOf(result, 'worker_no_live_runs')).toMatchObject({ ok: false, data: { live: 2 } });
    expect(checkOf(result, 'worker_no_live_runs').detail).toContain('2 run(s)');
    expect(result.ok).toBe(false);
    expect(evaluatePreflight('d', busy, defaults).ok).toBe(true);
  });

  it('worker_callback_token_compatible: compares the fingerprints', () => {
    const other = healthy({ dashboard: { status: 200, body: dashboardBody({ fingerprint: 'c'.repeat(64) }) } });
    const result = evaluatePreflight('d', other, strict);
    expect(checkOf(result, 'worker_callback_token_compatible')).toMatchObject({ ok: false, data: { matches: false } });
    expect(result.summary).toMatch(/^worker d not ready: worker_callback_token_compatible failed \(.*differs/);
  });
});

describe('worker_agent_isolation', () => {
  const withIsolation = (isolation: Record<string, unknown>) => healthy({ dashboard: { status: 200, body: dashboardBody({ isolation }) } });
  const unsandboxed = { mode: 'unsandboxed', sandboxed: false, runs_as: 'root', summary: "agents run UNSANDBOXED as the gate's own user root" };

  it('passes when the gate sandboxes its agents, as another user or as its own', () => {
    expect(checkOf(evaluatePreflight('d', withIsolation(ISOLATED), strict), 'worker_agent_isolation')).toMatchObject({ ok: true, data: { mode: 'isolated' } });
    expect(checkOf(evaluatePreflight('d', withIsolation({ ...ISOLATED, mode: 'sandboxed', runs_as: 'alice' }), strict), 'worker_agent_isolation').ok).toBe(true);
  });

  it("fails a strict preflight when the gate's agents would run unsandboxed, with the gate's own words", () => {
    const result = evaluatePreflight('d', withIsolation(unsandboxed), strict);
    expect(checkOf(result, 'worker_agent_isolation')).toMatchObject({ ok: false, detail: unsandboxed.summary, data: { mode: 'unsandboxed', sandboxed: false } });
    expect(result.ok).toBe(false);
    expect(result.summary).toMatch(/^worker d not ready: worker_agent_isolation failed \(agents run UNSANDBOXED/);
    expect(evaluatePreflight('d', withIsolation({ ...unsandboxed, mode: 'user_only' }), strict).ok).toBe(false);
    expect(evaluatePreflight('d', withIsolation(unsandboxed), defaults).ok).toBe(true);
  });

  it('fails when the gate does not report it (a gate from before the sandbox)', () => {
    const body = dashboardBody();
    const old = { ...body, service: { completion_callback_token_fingerprint: FINGERPRINT } };
    const result = evaluatePreflight('d', healthy({ dashboard: { status: 200, body: old } }), strict);
    expect(checkOf(result, 'worker_agent_isolation').ok).toBe(false);
    expect(checkOf(result, 'worker_agent_isolation').detail).toContain('reported no agent_isolation');
  });
});

describe('required checks', () => {
  it('decide ok on their own, whatever the mode', () => {
    const busy = healthy({
      flags: { queue_paused: false, maintenance_mode: false },
      dashboard: { status: 200, body: dashboardBody({ telemetry: { gpu_pct: 99, memory_available_mib: 1 }, totals: { live: 1 } }) },
    });
    const options = { ...strict, require_paused: false, required: DISPATCH_REQUIRED_CHECKS };
    const result = evaluatePreflight('default', busy, options);
    expect(result.ok).toBe(true);
    expect(failedNames(result)).toEqual(['worker_gpu_idle', 'worker_memory_available', 'worker_no_live_runs']);
    expect(result.summary).toContain('ready: 6/9 checks passed');
  });

  it('fail when one listed check fails', () => {
    for (const name of DISPATCH_REQUIRED_CHECKS) {
      const observed = healthy({
        flags: { queue_paused: false, maintenance_mode: name === 'control_maintenance_mode' },
        ...(name === 'wake_gate_healthz' ? { healthz: { status: 503, body: {} } } : {}),
        ...(name === 'wake_gate_dashboard_api' ? { dashboard: { status: 401, body: {} } } : {}),
        ...(name === 'worker_callback_token_compatible' ? { expectedCallbackFingerprint: 'f'.repeat(64) } : {}),
      });
      const result = evaluatePreflight('default', observed, { ...defaults, require_paused: false, required: DISPATCH_REQUIRED_CHECKS });
      expect(result.ok, name).toBe(false);
      expect(result.summary).toContain(`${name} failed`);
    }
  });

  it('count a listed check that was not run as failed', () => {
    const result = evaluatePreflight('default', healthy(), { ...defaults, require_paused: false, required: ['control_queue_paused'] });
    expect(result.ok).toBe(false);
    expect(result.summary).toContain('control_queue_paused failed (this check was required but not run)');
  });
});

describe('worker_capacity_matches and the slots of a target', () => {
  const withCapacity = (capacity: Record<string, unknown>, totals: Record<string, unknown> = {}) =>
    healthy({ dashboard: { status: 200, body: { ...dashboardBody({ totals }), capacity }, ms: 9 } });
  const fourGpus = [0, 1, 2, 3].map((index) => ({ index, offered: index !== 3 }));

  it('passes when the gate holds the slots and offers the GPUs the target declares', () => {
    const result = evaluatePreflight('gpu-box', withCapacity({ slots: 4, slots_held: 1, gpus: fourGpus }), { ...defaults, capacity: { slots: 4, gpus: [0, 2] } });
    expect(checkOf(result, 'worker_capacity_matches')).toMatchObject({ ok: true, detail: '4 slot(s) and 3 GPU(s) offered, as the target declares' });
  });

  it('names each disagreement: the slots, and a GPU the gate does not offer', () => {
    const result = evaluatePreflight('gpu-box', withCapacity({ slots: 2, slots_held: 0, gpus: fourGpus }), { ...strict, capacity: { slots: 4, gpus: [1, 3] } });
    expect(result.ok).toBe(false);
    expect(checkOf(result, 'worker_capacity_matches')).toMatchObject({
      ok: false,
      detail: "the target declares 4 slot(s) and its gate holds 2 (run_slots); GPU 3 of the target's gpus is not offered by its gate",
      data: { slots: 4, gate_slots: 2, gpus: [1, 3], gate_gpus: [0, 1, 2] },
    });
  });

  it('takes a gate without a capacity report for one slot only', () => {
    expect(checkOf(evaluatePreflight('old', healthy(), defaults), 'worker_capacity_matches').ok).toBe(true);
    expect(checkOf(evaluatePreflight('old', healthy(), { ...defaults, capacity: { slots: 2, gpus: 'all' } }), 'worker_capacity_matches')).toMatchObject({
      ok: false,
      detail: 'the target declares 2 slot(s), but its gate reports no capacity (a gate older than slots)',
    });
  });

  it('judges live runs on a target of several slots by a free slot', () => {
    const busy = { live: 3, active_or_waiting: 3 };
    const options = { ...defaults, capacity: { slots: 4, gpus: 'all' as const } };
    expect(checkOf(evaluatePreflight('gpu-box', withCapacity({ slots: 4, slots_held: 3, gpus: fourGpus }, busy), options), 'worker_no_live_runs')).toMatchObject({
      ok: true,
      detail: '3 of its 4 slots hold runs',
    });
    expect(checkOf(evaluatePreflight('gpu-box', withCapacity({ slots: 4, slots_held: 4, gpus: fourGpus }, busy), options), 'worker_no_live_runs')).toMatchObject({
      ok: false,
      detail: '4 of its 4 slots hold runs: none is free',
    });
  });
});
