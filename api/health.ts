import type { FastifyInstance } from 'fastify';
import { SERVICE_NAME, type AppDeps, type TemporalHealth } from './deps.ts';

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

async function storeHealth(deps: AppDeps): Promise<{ ok: boolean; error?: string }> {
  try {
    await withTimeout(deps.store.ping(), CHECK_TIMEOUT_MS, 'the store');
    return { ok: true };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}

async function temporalHealth(deps: AppDeps): Promise<TemporalHealth | undefined> {
  if (!deps.temporalHealth) return undefined;
  try {
    return await withTimeout(deps.temporalHealth(), CHECK_TIMEOUT_MS, 'Temporal');
  } catch (error) {
    return { ok: false, address: '', namespace: '', worker_state: 'UNKNOWN', error: (error as Error).message };
  }
}

export async function healthRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get('/healthz', async (_request, reply) => {
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

  app.get('/control/health', async (_request, reply) => {
    const [store, temporal] = await Promise.all([storeHealth(deps), temporalHealth(deps)]);
    const ok = store.ok && (temporal?.ok ?? true);
    return reply.code(ok ? 200 : 503).send({
      ok,
      service: SERVICE_NAME,
      db_path: deps.dbPath,
      store_backend: deps.store.backend,
      store: store,
      ...(temporal ? { temporal } : {}),
      timestamp: new Date().toISOString(),
    });
  });
}
