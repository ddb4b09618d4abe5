/**
 * What in the queue needs a person now (docs/automation.md#queue-alerts), and which findings a check may send given when each
 * was last notified. Pure: the facts come from the ledgers, the clock from the caller.
 */

export const FINDING_KINDS = ['run_hung', 'dispatch_error', 'blocked_item', 'needs_review', 'worker_stale', 'gate_timeout'] as const;
export type FindingKind = (typeof FINDING_KINDS)[number];
export type Severity = 'critical' | 'warning' | 'info';

export interface Finding {
  kind: FindingKind;
  severity: Severity;
  entity_type: 'run' | 'queue_item' | 'worker';
  entity_id: string;
  message: string;
  first_seen_at: string;
}

export interface AlertFacts {
  /** Runs waiting on their agent, with the time of their last callback (or of their dispatch when none came). */
  waitingRuns: readonly { run_id: string; project_id: string; state: string; last_heard_at: string }[];
  /** Queue items in a status that waits for a person, with the time they entered it. */
  heldItems: readonly { project_id: string; status: string; since: string; last_error: string | null }[];
  /** Runs the gate gave up on (gate_timeout), with when. */
  timedOutRuns: readonly { run_id: string; project_id: string; since: string; last_error: string | null }[];
  /** Worker targets whose latest observation is stale or failed. */
  workers: readonly { name: string; observed_at: string; ok: boolean; stale: boolean }[];
}

const HELD_KINDS: Record<string, { kind: FindingKind; severity: Severity; what: string }> = {
  dispatch_error: { kind: 'dispatch_error', severity: 'critical', what: 'gave up dispatching after repeated failures' },
  blocked: { kind: 'blocked_item', severity: 'warning', what: 'is blocked' },
  needs_review: { kind: 'needs_review', severity: 'warning', what: 'waits for a review' },
};

const ago = (since: string, now: Date) => `${Math.max(0, Math.round((now.getTime() - Date.parse(since)) / 60_000))} min`;

export function alertFindings(facts: AlertFacts, options: { hangAfterSec: number; now: Date }): Finding[] {
  const { now } = options;
  const findings: Finding[] = [];
  for (const run of facts.waitingRuns) {
    if (now.getTime() - Date.parse(run.last_heard_at) < options.hangAfterSec * 1000) continue;
    findings.push({
      kind: 'run_hung',
      severity: 'critical',
      entity_type: 'run',
      entity_id: run.run_id,
      message: `run ${run.run_id} of ${run.project_id} (${run.state}) has sent no callback for ${ago(run.last_heard_at, now)}`,
      first_seen_at: run.last_heard_at,
    });
  }
  for (const item of facts.heldItems) {
    const rule = HELD_KINDS[item.status];
    if (!rule) continue;
    findings.push({
      kind: rule.kind,
      severity: rule.severity,
      entity_type: 'queue_item',
      entity_id: item.project_id,
      message: `${item.project_id} ${rule.what} (${ago(item.since, now)})${item.last_error ? `: ${item.last_error}` : ''}`,
      first_seen_at: item.since,
    });
  }
  for (const run of facts.timedOutRuns) {
    findings.push({
      kind: 'gate_timeout',
      severity: 'warning',
      entity_type: 'run',
      entity_id: run.run_id,
      message: `the worker gate gave up waiting for run ${run.run_id} of ${run.project_id}${run.last_error ? `: ${run.last_error}` : ''}`,
      first_seen_at: run.since,
    });
  }
  for (const worker of facts.workers) {
    if (!worker.stale && worker.ok) continue;
    findings.push({
      kind: 'worker_stale',
      severity: 'warning',
      entity_type: 'worker',
      entity_id: worker.name,
      message: worker.stale ? `worker '${worker.name}' was last observed ${ago(worker.observed_at, now)} ago` : `worker '${worker.name}' failed its latest preflight`,
      first_seen_at: worker.observed_at,
    });
  }
  return findings;
}

/** One key per finding: the cooldown applies to it. */
export const findingKey = (finding: Pick<Finding, 'kind' | 'entity_type' | 'entity_id'>): string => `${finding.kind}:${finding.entity_type}:${finding.entity_id}`;

/** The findings to send now: those not notified within the cooldown (all of them when forced). */
export function dueFindings(findings: readonly Finding[], lastNotified: ReadonlyMap<string, string>, options: { cooldownSec: number; now: Date; force: boolean }) {
  const due: Finding[] = [];
  let suppressed = 0;
  for (const finding of findings) {
    const last = lastNotified.get(findingKey(finding));
    const cooling = last !== undefined && options.now.getTime() - Date.parse(last) < options.cooldownSec * 1000;
    if (cooling && !options.force) suppressed += 1;
    else due.push(finding);
  }
  return { due, suppressed };
}
