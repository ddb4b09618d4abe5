/**
 * The dispatch bench's figures (bench/dispatch.ts) and the report it prints of them: each scenario's percentiles, the
 * ratios to the bare-workflow baseline, and a summary of each figure against its target.
 */
import { availableParallelism } from 'node:os';
import type { Baseline } from './bare-workflow-baseline.ts';
import { loadNow, ms, type Stats } from './figures.ts';
import { percentileTable } from './support.ts';
import type { WriterLoadFigures } from './support/writer-load.ts';

const ratio = (value: number, baseline: number) => (baseline > 0 ? `${(value / baseline).toFixed(2)}x` : '-');

/** (a) One dry-run scenario: its HTTP answers and the candidate query alone. */
export interface DryRunScenario {
  name: string;
  busyLanes: number;
  http: Stats;
  sql: Stats;
  action: string;
}

/** (b) Live dispatch and callback latency, with each stage of the run. */
export interface LiveLatency {
  dispatch: Stats;
  callback: Stats;
  stages: Record<string, Stats>;
}

/** (c) Many runs over many lanes through the full path. */
export interface FullPath {
  runs: number;
  completed: number;
  lost: number;
  doubled: number;
  doubledDetail: string;
  laneOverlaps: number;
  elapsedMs: number;
  runsPerMin: number;
  answers: Record<string, number>;
  liveAnswer: Stats;
  statuses: string;
  callbacksIgnored: number;
  callbackErrors: number;
}

/** The bench's setting, as the report states it. */
export interface DispatchBenchSetting {
  lanes: number;
  callers: number;
  queuedRows: number;
  /** The load average when the bench started. */
  loadStart: string;
}

export function printReport(dry: DryRunScenario[], live: LiveLatency, baseline: Baseline, full: FullPath, load: WriterLoadFigures, paperSlots: number, totalMs: number, setting: DispatchBenchSetting): void {
  const { lanes: LANES, callers: CALLERS, queuedRows: QUEUED_ROWS, loadStart } = setting;
  console.log(`\ndispatch bench: node ${process.version}, ${availableParallelism()} CPUs, load average ${loadStart} at the start and ${loadNow()} at the end`);
  console.log(`${LANES} lanes; the control plane runs in this process on a local headless Temporal dev server and Postgres`);
  console.log('The agent finishes at once (bench/support/instant-gate.ts): a real gate reports readiness only after a quiet');
  console.log('window of at least 30 s, so these figures are the control plane and Temporal, not the agent or the gate.\n');

  console.log(`(a) dry-run POST /control/dispatch-next, force_preflight false, ${QUEUED_ROWS} queued rows over ${LANES} lanes`);
  console.log(
    percentileTable(
      dry.map((scenario) => ({
        lanes: scenario.name,
        answer: scenario.action,
        calls: scenario.http.n,
        'p50 ms': ms(scenario.http.p50),
        'p99 ms': ms(scenario.http.p99),
        'mean ms': ms(scenario.http.mean),
        'max ms': ms(scenario.http.max),
        'query alone p50/p99 ms': `${ms(scenario.sql.p50)} / ${ms(scenario.sql.p99)}`,
        'p99 <= 20 ms': scenario.http.p99 <= 20 ? 'yes' : 'no',
      })),
    ),
  );

  console.log(`\n(b) live runs one at a time (${live.dispatch.n} measured) beside bare workflows with one activity (${baseline.startToResult.n} each)`);
  console.log(
    percentileTable([
      row('dispatch-next live → worker accepted (HTTP round trip)', live.dispatch),
      row('  baseline: bare workflow start → result', baseline.startToResult),
      { measure: '  ratio', 'p50 ms': ratio(live.dispatch.p50, baseline.startToResult.p50), 'p99 ms': ratio(live.dispatch.p99, baseline.startToResult.p99), 'mean ms': '', 'max ms': '' },
      row('finishing callback posted → queue item completed', live.callback),
      row('  baseline: bare workflow signal → result', baseline.signalToResult),
      { measure: '  ratio', 'p50 ms': ratio(live.callback.p50, baseline.signalToResult.p50), 'p99 ms': ratio(live.callback.p99, baseline.signalToResult.p99), 'mean ms': '', 'max ms': '' },
    ]),
  );
  console.log('\n    stages (run_transitions.created_at):');
  console.log(
    percentileTable(Object.entries(live.stages).map(([name, figures]) => row(`    ${name}`, figures)))
      .split('\n')
      .map((line) => `    ${line}`)
      .join('\n'),
  );

  console.log(`\n(c) ${full.runs} runs over ${LANES} lanes, ${CALLERS} parallel callers of live dispatch-next, agent finishing at once`);
  console.log(`    completed ${full.completed} in ${(full.elapsedMs / 1000).toFixed(1)} s; queue rows: ${full.statuses}`);
  console.log(`    dispatch-next answers: ${Object.entries(full.answers).map(([action, n]) => `${action} ${n}`).join(', ')}`);
  console.log(`    live_dispatch answer under contention: p50 ${ms(full.liveAnswer.p50)} ms, p99 ${ms(full.liveAnswer.p99)} ms`);
  console.log(`    doubled check: ${full.doubledDetail}; overlapping runs on one lane ${full.laneOverlaps}`);
  console.log(`    callbacks ignored ${full.callbacksIgnored}, callbacks not accepted ${full.callbackErrors}`);

  console.log(`\n(d) live dispatch answers, idle and with ${load.drafts} draft-next calls under way (${load.writerCallsHeld} writer calls held, ${paperSlots} paper slots)`);
  console.log(
    percentileTable([
      row('dispatch-next live, idle', load.idle),
      row(`dispatch-next live, ${load.drafts} drafts in flight`, load.loaded),
      { measure: '  ratio', 'p50 ms': ratio(load.loaded.p50, load.idle.p50), 'p99 ms': ratio(load.loaded.p99, load.idle.p99), 'mean ms': '', 'max ms': '' },
    ]),
  );

  const yes = (ok: boolean) => (ok ? 'yes' : 'NO');
  const idle = dry[0]!;
  const worstDry = dry.reduce((worst, scenario) => (scenario.http.p99 > worst.http.p99 ? scenario : worst), idle);
  console.log('\nsummary');
  const lostClaimsPerRun = (full.answers['dispatch_blocked (claim lost)'] ?? 0) / Math.max(1, full.completed);
  console.log(
    percentileTable([
      { measure: `(a) dry-run dispatch-next p50 / p99, ${idle.name}`, value: `${ms(idle.http.p50)} / ${ms(idle.http.p99)} ms`, target: 'p99 <= 20 ms', met: yes(idle.http.p99 <= 20) },
      { measure: `(a) dry-run dispatch-next p50 / p99, worst: ${worstDry.name}`, value: `${ms(worstDry.http.p50)} / ${ms(worstDry.http.p99)} ms`, target: 'p99 <= 20 ms', met: yes(worstDry.http.p99 <= 20) },
      {
        measure: '(b) dispatch → worker accepted p50 / p99 (bare start → result)',
        value: `${ms(live.dispatch.p50)} / ${ms(live.dispatch.p99)} ms (${ms(baseline.startToResult.p50)} / ${ms(baseline.startToResult.p99)}) = ${ratio(live.dispatch.p50, baseline.startToResult.p50)} / ${ratio(live.dispatch.p99, baseline.startToResult.p99)}`,
        target: '<= 2x',
        met: yes(live.dispatch.p50 <= 2 * baseline.startToResult.p50 && live.dispatch.p99 <= 2 * baseline.startToResult.p99),
      },
      {
        measure: '(b) callback → completed p50 / p99 (bare signal → result)',
        value: `${ms(live.callback.p50)} / ${ms(live.callback.p99)} ms (${ms(baseline.signalToResult.p50)} / ${ms(baseline.signalToResult.p99)}) = ${ratio(live.callback.p50, baseline.signalToResult.p50)} / ${ratio(live.callback.p99, baseline.signalToResult.p99)}`,
        target: '<= 2x',
        met: yes(live.callback.p50 <= 2 * baseline.signalToResult.p50 && live.callback.p99 <= 2 * baseline.signalToResult.p99),
      },
      { measure: `(c) runs/min (${full.completed} of ${full.runs} over ${LANES} lanes)`, value: full.runsPerMin.toFixed(0), target: '>= 600', met: yes(full.runsPerMin >= 600) },
      { measure: '(c) lost claim attempts per run', value: lostClaimsPerRun.toFixed(2), target: '<= 2', met: yes(lostClaimsPerRun <= 2) },
      { measure: `(c) live_dispatch answer p50 under ${CALLERS} callers`, value: `${ms(full.liveAnswer.p50)} ms`, target: '<= 300 ms', met: yes(full.liveAnswer.p50 <= 300) },
      { measure: '(c) lost', value: String(full.lost), target: '0', met: yes(full.lost === 0) },
      { measure: '(c) doubled', value: String(full.doubled), target: '0', met: yes(full.doubled === 0) },
      {
        measure: `(d) live dispatch p99 with ${load.drafts} drafts in flight / idle`,
        value: `${ms(load.loaded.p99)} / ${ms(load.idle.p99)} ms = ${ratio(load.loaded.p99, load.idle.p99)}`,
        target: '<= 1.2x',
        met: yes(load.loaded.p99 <= 1.2 * load.idle.p99),
      },
    ]),
  );
  console.log(`\nwhole bench ${(totalMs / 1000).toFixed(0)} s`);
}

function row(measure: string, figures: Stats): Record<string, string> {
  return { measure, 'p50 ms': ms(figures.p50), 'p99 ms': ms(figures.p99), 'mean ms': ms(figures.mean), 'max ms': ms(figures.max) };
}
