import { readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { openStore } from '../../platform/store/open-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem, type QueueItemInsert } from '../../capabilities/runs/queue-items.ts';
import type { Store } from '../../platform/store/store.ts';
import {
  controlClient,
  reserveControlPlane,
  startControlPlaneProcess,
  writeControlPlaneConfig,
  type ControlPlaneFixture,
  type ControlPlaneProcess,
} from './control-plane.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { GATE_TOKEN, gateClient, startGateProcess, writeGateConfig, type GateFixture, type GateProcess } from './gate.ts';
import { isProcessRunning } from './process.ts';

/**
 * The whole run path with real processes, for end-to-end tests: a test database (and a store on it), a worker gate
 * whose dispatch script is the fake agent, and a control plane (HTTP + Temporal worker) whose callbacks go to that
 * gate's runs. A test file starts one in `beforeAll` and closes it in `afterAll`; a test that kills and restarts the
 * processes starts its own.
 */

/** How long starting a stack may take (a hook timeout). */
export const RUN_STACK_START_MS = 120_000;

export type ControlApi = ReturnType<typeof controlClient>;
export type GateApi = ReturnType<typeof gateClient>;
type Overrides = Record<string, unknown>;

export interface RunStackOptions {
  /** Gate config overrides (see writeGateConfig). */
  gateOverrides?: Overrides;
  /** Variables of the gate's environment besides the test's (a real agent's model key and server). */
  gateEnv?: Record<string, string>;
  /** Whether the gate is the control plane's default lane (worker_wake_gate_url); default true. */
  defaultLane?: boolean;
  /** Control-plane config overrides; a function is called once the gate runs, e.g. to route named lanes to it. */
  controlPlaneOverrides?: Overrides | ((gateFixture: GateFixture) => Overrides | Promise<Overrides>);
}

/** The runs the stack's gate holds at once (run_slots): more than the lanes any test routes to it. */
export const RUN_STACK_GATE_SLOTS = 32;

/** A worker target (config `worker_targets` entry) that dispatches to the gate. */
export function gateTarget(gateFixture: GateFixture, role: 'gpu_worker' | 'cpu_worker' = 'gpu_worker') {
  return { wake_gate_url: gateFixture.url, bearer_token: GATE_TOKEN, role };
}

/** Process groups of the agents the gate started, so a test leaves none behind: an agent outlives a killed gate. */
export class AgentGroups {
  private readonly groups = new Set<number>();

  /** Remembers the agent a dispatch-next answer says the worker started. */
  remember(answer: Record<string, any>): void {
    const group = answer.dispatch?.process_group_id;
    if (typeof group === 'number') this.groups.add(group);
  }

  kill(group: number): void {
    try {
      process.kill(-group, 'SIGKILL');
    } catch {
      // Already gone.
    }
    this.groups.delete(group);
  }

  killAll(): void {
    for (const group of [...this.groups]) this.kill(group);
  }
}

export interface ProcessOutput {
  label: string;
  output: () => string;
}

export class RunStack {
  database!: TestDatabase;
  store!: Store;
  gateFixture!: GateFixture;
  gate!: GateProcess;
  private gateEnv: Record<string, string> = {};
  cpFixture!: ControlPlaneFixture;
  cp!: ControlPlaneProcess;
  api!: ControlApi;
  gateApi!: GateApi;
  /** Output of every control-plane and gate process this stack started, for failure reports. */
  readonly outputs: ProcessOutput[] = [];
  readonly agents = new AgentGroups();
  /** The control plane's directory, known before its config is written. */
  private cpDir: string | undefined;

  /** Starts a control plane on the stack's config again (after the test killed the last one). */
  async restartControlPlane(): Promise<void> {
    this.cp = await startControlPlaneProcess(this.cpFixture);
    this.outputs.push({ label: `control plane #${this.started('control')}`, output: this.cp.output });
  }

  /** Starts the gate on its config again (after the test killed the last one). */
  async restartGate(): Promise<void> {
    this.gate = await startGateProcess(this.gateFixture, this.gateEnv);
    this.outputs.push({ label: `gate #${this.started('gate')}`, output: this.gate.output });
  }

  /** Kills the agent the ledger says a run's dispatch started. */
  async killRunAgent(runId: string): Promise<void> {
    const group = (await runRow(this.store, runId))?.dispatch_result?.process_group_id;
    if (typeof group === 'number') this.agents.kill(group);
  }

  /** A project and its queued item, seeded straight into the ledgers, with the fake agent's scenario in its directory. */
  async seed(projectId: string, options: SeedOptions): Promise<void> {
    const lane = options.lane;
    await this.store.transaction(async (tx) => {
      await insertProject(tx, { project_id: projectId, project_name: options.projectName, project_dir: projectId, workload_class: 'unknown', machine_target: lane });
      await insertQueueItem(tx, { project_id: projectId, project_name: options.projectName, machine_target: lane, workload_class: 'unknown', ...options.item });
    });
    await this.writeScenario(projectId, options.scenario);
  }

  /** Writes the fake agent's scenario into a project directory under the gate's project root. */
  async writeScenario(projectId: string, scenario: Record<string, unknown>): Promise<void> {
    const dir = join(this.gateFixture.projectRoot, projectId);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'scenario.json'), JSON.stringify(scenario));
  }

  /**
   * Stops everything the stack started, also when it started only part: the agents, both processes (also when
   * SIGSTOPped), the database and the temp dirs. Every step runs; the first error is thrown after the last.
   */
  async close(): Promise<void> {
    const errors: unknown[] = [];
    const step = async (action: () => Promise<unknown> | undefined) => {
      try {
        await action();
      } catch (error) {
        errors.push(error);
      }
    };
    const ledgerAgents = this.store ? await agentPidsInLedger(this.store) : [];
    this.agents.killAll();
    await Promise.all([this.cp, this.gate].map((child) => step(() => (child ? stopProcess(child) : undefined))));
    for (const pid of ledgerAgents) killAgentGroup(pid);
    await step(() => this.store?.close());
    await step(() => this.database?.drop());
    for (const dir of [this.gateFixture?.dir, this.cpFixture?.dir ?? this.cpDir]) if (dir) await step(() => rm(dir, { recursive: true, force: true }));
    if (errors.length > 0) throw errors[0];
  }

  /** Starts the processes in order; `startRunStack` closes what was started when a step fails. */
  async start(options: RunStackOptions): Promise<void> {
    this.database = await createTestDatabase();
    this.store = await openStore({ backend: 'pg', pgDatabaseUrl: this.database.url });
    const reserved = await reserveControlPlane();
    this.cpDir = reserved.dir;
    // The stack's one gate stands in for the worker of every lane a test routes to it, each lane's run at once.
    this.gateFixture = await writeGateConfig({ callbackUrl: reserved.callbackUrl, overrides: { run_slots: RUN_STACK_GATE_SLOTS, ...options.gateOverrides } });
    this.gateEnv = options.gateEnv ?? {};
    this.gate = await startGateProcess(this.gateFixture, this.gateEnv);
    this.outputs.push({ label: 'gate #1', output: this.gate.output });
    const overrides = typeof options.controlPlaneOverrides === 'function' ? await options.controlPlaneOverrides(this.gateFixture) : options.controlPlaneOverrides;
    this.cpFixture = await writeControlPlaneConfig(reserved, {
      databaseUrl: this.database.url,
      ...(options.defaultLane === false ? {} : { gateUrl: this.gateFixture.url }),
      overrides,
    });
    this.cp = await startControlPlaneProcess(this.cpFixture);
    this.outputs.push({ label: 'control plane #1', output: this.cp.output });
    this.api = controlClient(this.cpFixture.url);
    this.gateApi = gateClient(this.gateFixture);
  }

  private started(prefix: string): number {
    return this.outputs.filter((o) => o.label.startsWith(prefix)).length + 1;
  }
}

export interface SeedOptions {
  projectName: string;
  /** The item's worker target; none: the default lane. */
  lane?: string;
  scenario: Record<string, unknown>;
  /** More queue-item columns (priority, rank, review flag). */
  item?: Partial<QueueItemInsert>;
}

/** A database, store, gate and control plane, started in that order; on a failure, what was started is stopped. */
export async function startRunStack(options: RunStackOptions = {}): Promise<RunStack> {
  const stack = new RunStack();
  try {
    await stack.start(options);
  } catch (error) {
    await stack.close().catch(() => undefined);
    throw error;
  }
  return stack;
}

async function stopProcess(child: ControlPlaneProcess | GateProcess): Promise<void> {
  if (child.child.exitCode !== null || child.child.signalCode !== null) return;
  child.child.kill('SIGCONT');
  child.child.kill('SIGTERM');
  const timer = setTimeout(() => child.child.kill('SIGKILL'), 15_000);
  await child.exited;
  clearTimeout(timer);
}

/** The root pids of the agents every run's dispatch started, as the ledger recorded them. */
async function agentPidsInLedger(store: Store): Promise<number[]> {
  return store
    .query<{ pid: string | null }>(`SELECT dispatch_result->>'root_pid' AS pid FROM runs`)
    .then((result) => result.rows.map((row) => Number(row.pid)).filter((pid) => Number.isInteger(pid) && pid > 0))
    .catch(() => [] as number[]);
}

/** A fake agent outlives a killed gate by design; kill its process group once the test is over, if it is still there. */
function killAgentGroup(pid: number): void {
  if (!isProcessRunning(pid)) return;
  let cmdline = '';
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return;
  }
  if (!cmdline.includes('fake-agent')) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

// Ledger reads ------------------------------------------------------------------------------------------------------

export async function queueItemRow(store: Store, projectId: string): Promise<Record<string, any>> {
  const { rows } = await store.query('SELECT * FROM queue_items WHERE project_id = $1', [projectId]);
  return rows[0]!;
}

export async function runRow(store: Store, runId: string): Promise<Record<string, any> | undefined> {
  const { rows } = await store.query('SELECT * FROM runs WHERE run_id = $1', [runId]);
  return rows[0];
}

/** How many rows `sql` returns. */
export async function countRows(store: Store, sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await store.query<{ n: number }>(`SELECT count(*)::int AS n FROM (${sql}) AS counted`, params);
  return rows[0]!.n;
}

/** The reads above bound to a store; a function gives a store that is only opened later (in `beforeAll`). */
export function ledgerReads(store: Store | (() => Store)) {
  const current = typeof store === 'function' ? store : () => store;
  return {
    queueItem: (projectId: string) => queueItemRow(current(), projectId),
    runRow: (runId: string) => runRow(current(), runId),
    count: (sql: string, params: unknown[] = []) => countRows(current(), sql, params),
  };
}
