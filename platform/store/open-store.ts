import { join } from 'node:path';
import { createEmbeddedStore } from './embedded-store.ts';
import { assertSchemaCurrent, migrate } from './migrate.ts';
import { createPgStore } from './pg-store.ts';
import type { Store, StoreBackend } from './store.ts';

export interface OpenStoreOptions {
  backend: StoreBackend;
  /** Required for pg and pg_readonly. */
  pgDatabaseUrl?: string;
  /** Embedded files go to `<stateDir>/pgdata`; without it the embedded store lives in memory. */
  stateDir?: string;
  onProgress?: (message: string) => void;
  /** Postgres only: the read-model statement timeout, READ_STATEMENT_TIMEOUT_MS when absent (tests shorten it). */
  readStatementTimeoutMs?: number;
}

/** Opens the configured engine and brings its schema up to date (or checks it, when read-only). */
export async function openStore(options: OpenStoreOptions): Promise<Store> {
  const store = await createEngine(options);
  try {
    if (store.readOnly) {
      await assertSchemaCurrent(store);
    } else {
      const applied = await migrate(store);
      if (applied.length > 0) options.onProgress?.(`applied migrations ${applied.join(', ')}`);
    }
    return store;
  } catch (error) {
    await store.close().catch(() => undefined);
    throw error;
  }
}

async function createEngine(options: OpenStoreOptions): Promise<Store> {
  if (options.backend === 'embedded') {
    return createEmbeddedStore(options.stateDir ? join(options.stateDir, 'pgdata') : undefined);
  }
  if (!options.pgDatabaseUrl) throw new Error(`control_plane_store_backend "${options.backend}" needs pg_database_url`);
  return createPgStore({
    connectionString: options.pgDatabaseUrl,
    readOnly: options.backend === 'pg_readonly',
    ...(options.readStatementTimeoutMs !== undefined ? { readStatementTimeoutMs: options.readStatementTimeoutMs } : {}),
  });
}
