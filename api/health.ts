import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AgentIsolationSchema } from '../worker-gate/contract/agent-isolation.ts';
import { RunCgroupsStatusSchema } from '../worker-gate/contract/gate-endpoints.ts';
import { errorResponses } from '../platform/http/responses.ts';
import { SERVICE_NAME } from '../platform/service-name.ts';
import type { AppDeps, TemporalHealth } from './deps.ts';

const CHECK_TIMEOUT_MS = 3000;

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function storeHealth(deps: Pick<AppDeps, 'store'>): Promise<{ ok: boolean; error?: string }> {
  try {
    await withTimeout(deps.store.ping(), CHECK_TIMEOUT_MS, 'the store');
    return { ok: true };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}

async function temporalHealth(deps: Pick<AppDeps, 'temporalHealth'>): Promise<TemporalHealth | undefined> {
  if (!deps.temporalHealth) return undefined;
  try {
    return await withTimeout(deps.temporalHealth(), CHECK_TIMEOUT_MS, 'Temporal');
  } catch (error) {
    return { ok: false, address: '', namespace: '', worker_state: 'UNKNOWN', error: (error as Error).message };
  }
}

const LivenessSchema = z.object({
  ok: z.boolean(),
  service: z.string(),
  worker_gate: z.object({ ready: z.boolean() }).optional().describe('Present when this process also serves the worker gate'),
  detail: z.string().optional().describe('Why it is not ready'),
  timestamp: z.string(),
});

const HealthSchema = z.object({
  ok: z.boolean(),
  service: z.string(),
  db_path: z.string(),
  store_backend: z.string(),
  store: z.object({ ok: z.boolean(), error: z.string().optional() }),
  temporal: z.object({
    ok: z.boolean(),
    address: z.string(),
    namespace: z.string(),
    worker_state: z.string(),
    ui_url: z.string().optional(),
    error: z.string().optional(),
  }).optional(),
  config: z.object({
    replica_id: z.string().describe('This replica: host, port and a random suffix per start'),
    config_fingerprint: z.string().describe('16 hex characters over every config field but the per-replica ones, secrets as keyed digests'),
    replicas: z.array(z.object({ replica_id: z.string(), config_fingerprint: z.string(), started_at: z.string(), last_seen_at: z.string() }))
      .describe('The control-plane replicas heard from within 30 s, oldest first'),
    drift: z.boolean().describe('The live replicas do not all share one config fingerprint'),
    differing_fields: z.array(z.string()).describe('The config fields they disagree on (names only)'),
    error: z.string().optional(),
  }).optional().describe('Absent on a read-only store'),
  worker_gate: z
    .object({
      ready: z.boolean(),
      agent_isolation: AgentIsolationSchema.describe('What an agent of this gate can see and the user it runs as (docs/security.md#security-model)'),
      run_cgroups: RunCgroupsStatusSchema.optional(),
    })
    .optional()
    .describe('Present when this process also serves the worker gate'),
  timestamp: z.string(),
});

const tags = ['health'];

async function clusterConfig(deps: Pick<AppDeps, 'clusterConfig'>) {
  if (!deps.clusterConfig) return undefined;
  try {
    return await withTimeout(deps.clusterConfig(), CHECK_TIMEOUT_MS, 'the replica registry');
  } catch (error) {
    return { replica_id: '', config_fingerprint: '', replicas: [], drift: false, differing_fields: [], error: (error as Error).message };
  }
}

export async function healthRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'dbPath' | 'temporalHealth' | 'clusterConfig' | 'workerGateReady' | 'workerGateIsolation' | 'workerGateRunCgroups'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const liveness = { tags, summary: 'Liveness; 503 while the worker gate served here is starting', response: { 200: LivenessSchema, 503: LivenessSchema } };
  app.get('/healthz', { config: { auth: 'public' }, schema: liveness }, async (_request, reply) => {
    const gateReady = deps.workerGateReady?.();
    const ok = gateReady ?? true;
    return reply.code(ok ? 200 : 503).send({
      ok,
      service: SERVICE_NAME,
      ...(gateReady === undefined ? {} : { worker_gate: { ready: gateReady } }),
      ...(ok ? {} : { detail: 'the worker gate is starting' }),
      timestamp: new Date().toISOString(),
    });
  });

  const health = {
    tags,
    summary: 'Store and Temporal health, and whether the control-plane replicas agree on their config; 503 when the store or Temporal is down',
    response: { 200: HealthSchema, 503: HealthSchema, ...errorResponses(401) },
  };
  app.get('/control/health', { config: { auth: 'control' }, schema: health }, async (_request, reply) => {
    const [store, temporal, config] = await Promise.all([storeHealth(deps), temporalHealth(deps), clusterConfig(deps)]);
    const ok = store.ok && (temporal?.ok ?? true);
    return reply.code(ok ? 200 : 503).send({
      ok,
      service: SERVICE_NAME,
      db_path: deps.dbPath,
      store_backend: deps.store.backend,
      store: store,
      ...(temporal ? { temporal } : {}),
      ...(config ? { config } : {}),
      ...(deps.workerGateIsolation ? { worker_gate: { ready: deps.workerGateReady?.() ?? false, agent_isolation: deps.workerGateIsolation(), ...(deps.workerGateRunCgroups ? { run_cgroups: deps.workerGateRunCgroups() } : {}) } } : {}),
      timestamp: new Date().toISOString(),
    });
  });
}
