import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PGlite } from '@electric-sql/pglite';
import { makePrivate } from './private-files.ts';
import { ROW_PARSERS } from './row-parsers.ts';
import type { Queryable, QueryResult, Store } from './store.ts';

interface PgliteLike {
  query<Row>(sql: string, params?: unknown[]): Promise<{ rows: Row[]; affectedRows?: number }>;
  exec(sql: string): Promise<unknown>;
}

const scope = (db: PgliteLike): Queryable => ({
  query: (sql, params) => run(db, sql, params),
  exec: async (sql) => {
    await db.exec(sql);
  },
});

const run = async <Row>(db: PgliteLike, sql: string, params?: readonly unknown[]): Promise<QueryResult<Row>> => {
  const result = await db.query<Row>(sql, params as unknown[] | undefined);
  // PGlite counts only written rows (0 for a SELECT); pg's rowCount is the rows a SELECT returned too.
  return { rows: result.rows, rowCount: Math.max(result.affectedRows ?? 0, result.rows.length) };
};

/**
 * A single-user embedded database needs little shared memory: PGlite's WebAssembly memory only grows, so Postgres's
 * default 128 MB of shared buffers would stay resident for the life of the process (docs/testing.md#memory).
 */
const EMBEDDED_POSTGRES_SETTINGS = ['shared_buffers = 16MB', 'temp_buffers = 2MB', 'wal_buffers = 1MB', 'maintenance_work_mem = 16MB'];

const PGLITE_MODULE = createRequire(import.meta.url).resolve('@electric-sql/pglite');

/**
 * Creating a data directory runs initdb inside the WebAssembly instance, whose memory then stays allocated: doing it in
 * a short-lived child process spares the service several hundred MiB of resident memory it would never use again.
 */
async function initializeDataDir(dataDir: string): Promise<void> {
  if (existsSync(join(dataDir, 'PG_VERSION'))) return;
  const script = `require(${JSON.stringify(PGLITE_MODULE)}).PGlite.create(process.argv[1]).then((db) => db.close());`;
  await promisify(execFile)(process.execPath, ['-e', script, dataDir]);
}

/** In-process Postgres (PGlite). `dataDir` undefined keeps everything in memory (tests). */
export async function createEmbeddedStore(dataDir?: string): Promise<Store> {
  if (dataDir) {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    await initializeDataDir(dataDir);
  }
  const db = await PGlite.create(dataDir ?? 'memory://', { parsers: ROW_PARSERS, postgresqlconf: EMBEDDED_POSTGRES_SETTINGS });
  // PGlite writes its files 0666 whatever the umask, some of them as it opens: the ledgers must not be writable by
  // other users (the agents'). Files it adds later sit in a 0700 directory that no other user can enter.
  if (dataDir) makePrivate(dataDir, { recursive: true });
  return {
    backend: 'embedded',
    location: dataDir ?? 'memory://',
    readOnly: false,
    ...scope(db),
    reads: scope(db),
    transaction: (fn) => db.transaction((tx) => fn(scope(tx))),
    async ping() {
      await db.query('SELECT 1');
    },
    async close() {
      if (!db.closed) await db.close();
    },
  };
}
