import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../api/deps.ts';
import { createServer, type RegisteredRoute } from '../../api/create-server.ts';
import { createLogger } from '../../bin/runtime/logger.ts';
import { SECRET_FIELDS } from '../../config/schema.ts';
import { openStore } from '../../store/open-store.ts';
import type { Store } from '../../store/store.ts';
import { createTestDatabase } from './database.ts';

export const TEST_TOKEN = 'test-control-token-0123456789abcdef';

/** Every log line the app wrote, as raw text, so tests can assert what never reaches the logs. */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _encoding: string, done: () => void) {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  }
  get text() {
    return this.lines.join('\n');
  }
}

export interface TestApp {
  app: FastifyInstance;
  store: Store;
  logs: LogCapture;
  routes: RegisteredRoute[];
  auth: { authorization: string };
  close(): Promise<void>;
}

/** The real HTTP app on a fresh cloned Postgres database; no Temporal connection unless deps say so. */
export async function startTestApp(overrides: Partial<AppDeps> = {}): Promise<TestApp> {
  const database = await createTestDatabase();
  const store = await openStore({ backend: 'pg', pgDatabaseUrl: database.url });
  const logs = new LogCapture();
  const logger = createLogger({ level: 'debug', secretConfigFields: SECRET_FIELDS, destination: logs });
  const routes: RegisteredRoute[] = [];
  const app = await createServer(
    { store, controlApiToken: TEST_TOKEN, sessionCookieSecure: false, dbPath: store.location, ...overrides },
    logger,
    { onRoute: (route) => routes.push(route) },
  );
  return {
    app,
    store,
    logs,
    routes,
    auth: { authorization: `Bearer ${TEST_TOKEN}` },
    async close() {
      await app.close();
      await store.close();
      await database.drop();
    },
  };
}
