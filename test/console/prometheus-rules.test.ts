// expected duration: ~30 s
import { spawn } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { cacheRoot } from '../../platform/temporal/temporal-cli.ts';
import { FINDING_KINDS } from '../../capabilities/automation/domain/alert-findings.ts';
import { GATE_TOKEN, waitUntil } from '../support/gate.ts';
import { parseExposition, sampleValue, scrapeText, type PromSample } from '../support/prometheus.ts';
import { RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';

/**
 * The alert rules an operator loads (deploy/prometheus/rcp-alerts.yml, docs/operations.md#metrics-and-observability), judged by the real
 * promtool: the rules check, their unit tests pass with a firing and a quiet case per alert, every series they name is
 * one a real control plane and gate export with the labels the rules select on, and `promtool check metrics` finds
 * nothing to fix in our own series.
 */

/** Where scripts/ensure-promtool.sh puts it, unless PROMTOOL_PATH names another. */
const PROMTOOL = process.env.PROMTOOL_PATH || join(cacheRoot(), 'promtool', 'promtool');
const RULES_DIR = fileURLToPath(new URL('../../deploy/prometheus/', import.meta.url));
const RULES = 'rcp-alerts.yml';
const RULE_TESTS = 'rcp-alerts.test.yml';

/** Series Prometheus makes itself for every target; no process exports them. */
const PROMETHEUS_OWN = new Set(['up']);
/** Labels Prometheus adds to every series it scrapes. */
const TARGET_LABELS = new Set(['job', 'instance']);

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleTestCase {
  input_series: { series: string; values: string }[];
  alert_rule_test: { alertname: string; exp_alerts?: unknown[] }[];
}

const rules = (): Rule[] => (parse(readFileSync(join(RULES_DIR, RULES), 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((group) => group.rules);
const ruleTests = (): RuleTestCase[] => (parse(readFileSync(join(RULES_DIR, RULE_TESTS), 'utf8')) as { tests: RuleTestCase[] }).tests;

function requirePromtool(): void {
  try {
    accessSync(PROMTOOL, constants.X_OK);
  } catch {
    throw new Error(`promtool was not found at ${PROMTOOL}. Run "bash scripts/ensure-promtool.sh" (npm test does it for you), or set PROMTOOL_PATH to a promtool binary.`);
  }
}

/** Runs promtool in deploy/prometheus/ (the rule tests name the rules file relative to it), stdin from `input`. */
function promtool(args: readonly string[], input = ''): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(PROMTOOL, args, { cwd: RULES_DIR, stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
    child.stdin.end(input);
  });
}

/**
 * `promtool check metrics` on an exposition: one `<metric> <problem>` line per lint problem. Exit 3 means problems
 * were found and 0 none; anything else (1: the text did not parse) fails here.
 */
async function lintProblems(exposition: string): Promise<{ metric: string; problem: string }[]> {
  const { code, output } = await promtool(['check', 'metrics'], exposition);
  if (code !== 0 && code !== 3) throw new Error(`promtool check metrics exited ${code}:\n${output}`);
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [, metric, problem] = /^(\S+) (.+)$/.exec(line) ?? [];
      if (!metric || !problem) throw new Error(`promtool check metrics printed an unexpected line: ${line}`);
      return { metric, problem };
    });
}

/** `name{label="value", …}` selectors of a PromQL expression, with their matchers. */
function selectors(expr: string): { name: string; matchers: { label: string; op: string; value: string }[] }[] {
  return [...expr.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}/g)].map(([, name, body]) => ({
    name: name!,
    matchers: [...body!.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"/g)].map(([, label, op, value]) => ({ label: label!, op: op!, value: value! })),
  }));
}

/** Every series name a rule mentions, in its expression or its annotations (what it tells an operator to look at). */
const namedSeries = (rule: Rule): string[] => [...new Set(JSON.stringify(rule).match(/\b(?:rcp|temporal|nodejs|process)_[a-z0-9_]+\b/g) ?? [])];

beforeAll(requirePromtool);

describe('deploy/prometheus/rcp-alerts.yml', () => {
  it('passes promtool check rules, and every rule has a for, a severity and annotations that say what to do', async () => {
    const { code, output } = await promtool(['check', 'rules', RULES]);
    expect(code, output).toBe(0);
    expect(output).toContain(`SUCCESS: ${rules().length} rules found`);
    for (const rule of rules()) {
      expect(rule.for, rule.alert).toMatch(/^\d+[smh]$/);
      expect(['critical', 'warning'], rule.alert).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary?.length, rule.alert).toBeGreaterThan(20);
      expect(rule.annotations?.description?.length, rule.alert).toBeGreaterThan(100);
    }
    // One for each of: a run hung, a gate unreachable, dispatch errors, callbacks failing (both ends), config drift
    // between replicas, a schedule whose ticks stopped completing, Temporal task latency (workflow and activity tasks),
    // a slot held past its run's expected runtime, a queue that has not moved.
    expect(rules().map((rule) => rule.alert).sort()).toEqual([
      'RcpCallbacksRefused',
      'RcpConfigDrift',
      'RcpDispatchErrors',
      'RcpGateCallbacksUndelivered',
      'RcpGateUnreachable',
      'RcpQueueNotMoving',
      'RcpRunHung',
      'RcpScheduleStalled',
      'RcpSlotHeldPastExpectedRuntime',
      'RcpTemporalActivityTaskLatency',
      'RcpTemporalWorkflowTaskLatency',
    ]);
  });

  it('passes its promtool unit tests, which have a firing and a quiet case for every alert', async () => {
    const { code, output } = await promtool(['test', 'rules', RULE_TESTS]);
    expect(code, output).toBe(0);
    expect(output).toContain('SUCCESS');
    const cases = ruleTests().flatMap((test) => test.alert_rule_test);
    for (const { alert } of rules()) {
      const ofAlert = cases.filter((c) => c.alertname === alert);
      expect(ofAlert.some((c) => (c.exp_alerts ?? []).length > 0), `${alert}: a case where it fires`).toBe(true);
      expect(ofAlert.some((c) => (c.exp_alerts ?? []).length === 0), `${alert}: a case where it does not`).toBe(true);
    }
  });

  it('fails promtool test rules when a rule stops matching its cases (the unit tests can fail)', async () => {
    // The hung run that should fire RcpRunHung never shows up.
    const text = readFileSync(join(RULES_DIR, RULE_TESTS), 'utf8');
    const broken = text.replaceAll("values: '0 0 2x20'", "values: '0 0 0x20'");
    expect(broken).not.toBe(text);
    const dir = await mkdtemp(join(tmpdir(), 'rcp-rules-'));
    try {
      await copyFile(join(RULES_DIR, RULES), join(dir, RULES));
      await writeFile(join(dir, RULE_TESTS), broken);
      const { code, output } = await promtool(['test', 'rules', join(dir, RULE_TESTS)]);
      expect(code).not.toBe(0);
      expect(output).toContain('RcpRunHung');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the rules against a real control plane and gate', () => {
  let stack: RunStack;
  let controlPlaneText: string;
  let gateText: string;
  let live: PromSample[];

  beforeAll(async () => {
    // The queue pump starts a workflow every 2 s, so the worker's task-latency histograms have samples to show.
    stack = await startRunStack({ controlPlaneOverrides: { queue_pump_enabled: true, queue_pump_interval_sec: 2 } });
    // A callback with a wrong token: the callback route's request series has a refusal, as RcpCallbacksRefused reads it.
    const refused = await fetch(stack.cpFixture.callbackUrl, { method: 'POST', headers: { authorization: 'Bearer wrong-token', 'content-type': 'application/json' }, body: '{}' });
    expect(refused.status).toBe(401);
    await waitUntil(
      'the Temporal worker to report workflow and activity task latencies',
      async () => {
        const text = await scrapeText(stack.cpFixture.url);
        return ['temporal_workflow_task_schedule_to_start_latency_seconds_bucket', 'temporal_activity_schedule_to_start_latency_seconds_bucket'].every((name) => text.includes(name)) || undefined;
      },
      45_000,
      1_000,
    );
    [controlPlaneText, gateText] = await Promise.all([scrapeText(stack.cpFixture.url), scrapeText(stack.gateFixture.url, GATE_TOKEN)]);
    live = [...parseExposition(controlPlaneText), ...parseExposition(gateText)];
  }, RUN_STACK_START_MS + 60_000);
  afterAll(() => stack?.close());

  it('name only series the product exports, selected by labels and values it really writes', () => {
    const missing: string[] = [];
    for (const rule of rules()) {
      for (const name of namedSeries(rule)) {
        if (!live.some((sample) => sample.name === name)) missing.push(`${rule.alert}: ${name}`);
      }
      for (const { name, matchers } of selectors(rule.expr)) {
        if (PROMETHEUS_OWN.has(name)) continue;
        const samples = live.filter((sample) => sample.name === name);
        for (const { label, op, value } of matchers) {
          const found = op === '=' ? samples.some((sample) => sample.labels[label] === value) : samples.some((sample) => label in sample.labels);
          if (!found) missing.push(`${rule.alert}: ${name}{${label}${op}"${value}"}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it('have unit-test series labelled as the live ones are', () => {
    const mismatched: string[] = [];
    for (const { series } of ruleTests().flatMap((test) => test.input_series)) {
      const [fixture] = parseExposition(`${series.replaceAll(', ', ',')} 0`);
      if (!fixture || PROMETHEUS_OWN.has(fixture.name)) continue;
      const wanted = Object.keys(fixture.labels).filter((label) => !TARGET_LABELS.has(label)).sort().join(',');
      const real = new Set(live.filter((sample) => sample.name === fixture.name).map((sample) => Object.keys(sample.labels).sort().join(',')));
      if (!real.has(wanted)) mismatched.push(`${series}: live label sets are ${[...real].map((set) => `{${set}}`).join(' ') || 'none'}`);
    }
    expect(mismatched).toEqual([]);
  });

  it('promtool check metrics finds nothing to fix in our rcp_* series, on the control plane and on the gate', async () => {
    // Only the rcp_* findings are ours to fix. The rest are in series whose names we do not choose: prom-client's
    // default metrics (today its nodejs_active_*_total gauges, where promtool wants _total on counters only), and the
    // temporal_* the SDK core's exporter names, which would be fixed there, not here.
    const shared = ['rcp_http_request_duration_seconds', 'rcp_worker_callbacks_total', 'rcp_dispatch_outcomes_total', 'rcp_live_dispatch_duration_seconds'];
    const scrapes = [
      ['control plane', controlPlaneText, [...shared, 'rcp_queue_items', 'rcp_runs', 'rcp_queue_alert_findings', 'rcp_lane_held', 'rcp_lane_held_seconds', 'rcp_lane_expected_runtime_seconds', 'rcp_lane_gpus', 'rcp_schedule_interval_seconds', 'rcp_schedule_last_completed_tick_age_seconds']],
      ['gate', gateText, [...shared, 'rcp_gate_runs', 'rcp_gate_samples', 'rcp_gate_sampling_cpu_seconds', 'rcp_gate_outbox_pending', 'rcp_gate_run_slots', 'rcp_gate_run_slots_held']],
    ] as const;
    for (const [who, text, expected] of scrapes) {
      const families = [...text.matchAll(/^# TYPE (rcp_\w+) /gm)].map((match) => match[1]);
      expect(families, `${who}: the rcp_* families promtool lints`).toEqual(expect.arrayContaining([...expected]));
      const ours = (await lintProblems(text)).filter((problem) => problem.metric.startsWith('rcp_'));
      expect(ours, who).toEqual([]);
    }
  });

  it('promtool check metrics reports problems in rcp_* series when there are some (the lint check can fail)', async () => {
    const bad = '# HELP rcp_wait_ms Waited\n# TYPE rcp_wait_ms gauge\nrcp_wait_ms 1\n# TYPE rcp_sends counter\nrcp_sends 2\n';
    expect(await lintProblems(bad)).toEqual(
      expect.arrayContaining([
        { metric: 'rcp_wait_ms', problem: expect.stringContaining('abbreviated units') },
        { metric: 'rcp_sends', problem: expect.stringContaining('no help text') },
      ]),
    );
  });

  it('rcp_schedule_last_completed_tick_age_seconds reports the queue pump completing its ticks, and nothing for the paused queue check', { timeout: 30_000 }, async () => {
    const taskQueue = stack.cpFixture.taskQueue;
    const pump = { schedule: 'queue_pump', task_queue: taskQueue };
    // A busy Temporal may not have answered any scrape in time yet; from its first answer on, every scrape has an age.
    let samples: PromSample[] = [];
    await expect
      .poll(async () => {
        samples = parseExposition(await scrapeText(stack.cpFixture.url));
        return sampleValue(samples, 'rcp_schedule_last_completed_tick_age_seconds', pump);
      }, { timeout: 20_000, interval: 500 })
      .toBeDefined();
    expect(sampleValue(samples, 'rcp_schedule_interval_seconds', pump)).toBe(2);
    expect(sampleValue(samples, 'rcp_schedule_interval_seconds', { schedule: 'queue_check', task_queue: taskQueue })).toBe(300);
    // Ticks every 2 s have completed since the stack started: the newest is seconds old, not the stack's age.
    const age = sampleValue(samples, 'rcp_schedule_last_completed_tick_age_seconds', pump);
    expect(age).toBeGreaterThanOrEqual(0);
    expect(age).toBeLessThan(15);
    expect(sampleValue(samples, 'rcp_schedule_last_completed_tick_age_seconds', { schedule: 'queue_check' })).toBeUndefined();
  });

  it('rcp_queue_alert_findings counts, by kind, what the queue check finds', { timeout: 30_000 }, async () => {
    await stack.seed('prom-alert-error', { projectName: 'prom-alert-error', scenario: {}, item: { status: 'dispatch_error' } });
    await stack.seed('prom-alert-hung', { projectName: 'prom-alert-hung', scenario: {}, item: { status: 'needs_review' } });
    // A run whose agent went quiet two hours ago (queue_alert_hang_after_sec is 3600 by default).
    await stack.store.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, updated_at)
       VALUES ('prom-alert-hung-20261122T080000Z', 'prom-alert-hung', 'run:prom-alert-hung-20261122T080000Z', 'running', 'default', 'http://127.0.0.1:9', 'unknown', 'test', now() - interval '2 hours')`,
    );
    // The default lane's gate, last observed an hour ago: stale (after 15 minutes).
    await stack.store.query(
      `INSERT INTO worker_observations (target, wake_gate_url, ok, summary, checks, observed_at)
       VALUES ('default', $1, true, 'ok', '[]'::jsonb, now() - interval '1 hour')`,
      [stack.gateFixture.url],
    );
    const check = await stack.api('POST', '/control/api/alerts/queue-check', { dry_run: true });
    expect(check.status).toBe(200);
    const found = parseExposition(await scrapeText(stack.cpFixture.url));
    const counted = Object.fromEntries(FINDING_KINDS.map((kind) => [kind, sampleValue(found, 'rcp_queue_alert_findings', { kind })]));
    const checked = Object.fromEntries(FINDING_KINDS.map((kind) => [kind, (check.body.findings as { kind: string }[]).filter((f) => f.kind === kind).length]));
    expect(counted).toEqual(checked);
    expect(counted).toMatchObject({ run_hung: 1, dispatch_error: 1, needs_review: 1, worker_stale: 1 });
  });
});
