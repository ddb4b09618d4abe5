/**
 * The dispatch bench's setting (bench/dispatch.ts): its tokens, database and task queue, the control plane's config
 * over the instant gate's lanes, a client of the control API, and the queue rows it seeds.
 */
import { join } from 'node:path';
import { ConfigFileSchema, type Config } from '../platform/config/schema.ts';
import type { Store } from '../platform/store/store.ts';
import { benchDatabaseUrl } from './support.ts';
import type { InstantGate } from './support/instant-gate.ts';

export const CONTROL_TOKEN = 'bench-control-token-0123456789abcdef';
export const GATE_TOKEN = 'bench-gate-token-0123456789abcdef';
export const CALLBACK_TOKEN = 'bench-callback-token-0123456789abcd';
export const DATABASE = `rcp_bench_dispatch_${process.pid}`;
export const CONTROL_QUEUE = `bench-control-plane-${process.pid}`;

export const laneName = (index: number) => `lane-${String(index).padStart(2, '0')}`;

/** The control plane's config for the bench: `lanes` worker targets on the instant gate, Postgres, the local Temporal. */
export function benchConfig(dir: string, port: number, gate: InstantGate, temporalAddress: string, writerUrl: string, lanes: number): Config {
  const targets = Object.fromEntries(
    Array.from({ length: lanes }, (_, index) => [laneName(index), { wake_gate_url: gate.laneUrl(laneName(index)), bearer_token: GATE_TOKEN, role: 'gpu_worker' }]),
  );
  const parsed = ConfigFileSchema.parse({
    roles: ['control_plane'],
    control_api_bearer_token: CONTROL_TOKEN,
    completion_callback_url: `http://127.0.0.1:${port}/control/api/worker-callback`,
    completion_callback_token: CALLBACK_TOKEN,
    state_dir: join(dir, 'state'),
    project_root: join(dir, 'projects'),
    dispatch_script_path: join(dir, 'unused-dispatch.sh'),
    listen_host: '127.0.0.1',
    listen_port: port,
    control_plane_store_backend: 'pg',
    pg_database_url: benchDatabaseUrl(DATABASE),
    temporal_address: temporalAddress,
    temporal_task_queue: CONTROL_QUEUE,
    live_dispatch_enabled: true,
    dispatch_timeout_sec: 30,
    max_wait_after_idle_sec: 600,
    default_workload_class: 'unknown',
    worker_targets: targets,
    paper_writer_provider: 'openai_compatible',
    paper_writer_base_url: writerUrl,
    paper_writer_model: 'bench-writer',
    paper_writer_timeout_sec: 600,
  });
  return { ...parsed, research_provider_api_key: undefined };
}

export interface ApiAnswer {
  status: number;
  body: Record<string, unknown>;
}

/** POSTs to the control API with the bench's token. */
export function controlApi(baseUrl: string) {
  return async (path: string, body: unknown): Promise<ApiAnswer> => {
    const response = await fetch(`${baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CONTROL_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
  };
}

/**
 * Projects and their queue rows in two statements. In order (the runs of (b) and (c)), item i goes to lane i % lanes
 * and sorts before item i + 1. Spread (the long queue of (a)): priorities 0-99 and ranks 0-999 scattered over the
 * rows, each priority on every lane, as a long real queue has them.
 */
export async function seedItems(store: Store, prefix: string, count: number, options: { spreadPriorities: boolean; lanes: number }): Promise<void> {
  const lane = options.spreadPriorities ? `'lane-' || lpad(((n / 100) % $3)::text, 2, '0')` : `'lane-' || lpad((n % $3)::text, 2, '0')`;
  const order = options.spreadPriorities ? 'n % 100, (n * 7919) % 1000' : '10, n';
  await store.query(
    `INSERT INTO projects (project_id, project_name, project_dir, workload_class, machine_target)
     SELECT $1 || lpad(n::text, 6, '0'), 'Bench project ' || n, 'bench/' || $1 || n, 'unknown', ${lane}
       FROM generate_series(0, $2::int - 1) AS n`,
    [prefix, count, options.lanes],
  );
  await store.query(
    `INSERT INTO queue_items (project_id, project_name, dispatch_priority, selection_rank, machine_target, workload_class)
     SELECT $1 || lpad(n::text, 6, '0'), 'Bench project ' || n, ${order}, ${lane}, 'unknown'
       FROM generate_series(0, $2::int - 1) AS n`,
    [prefix, count, options.lanes],
  );
  await store.query('ANALYZE projects');
  await store.query('ANALYZE queue_items');
}
