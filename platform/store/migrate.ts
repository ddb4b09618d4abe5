import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Queryable, Store } from './store.ts';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

const MIGRATIONS_DIR = fileURLToPath(new URL('../../store/migrations/', import.meta.url));
const FILE_PATTERN = /^(\d{4})_([a-z0-9_]+)\.sql$/;
// Any fixed number: serializes concurrent start-ups against one database.
const MIGRATION_LOCK_ID = 727_274_001;

/**
 * Checksums a database may have recorded for a migration whose committed text was later restored. 0003 was once
 * edited in place to add the dispatch candidate indexes; that edit now lives in 0004 (written to be a no-op where the
 * indexes exist) and 0003 is back to its first text, so databases migrated by either text of 0003 keep starting.
 * Migrations are append-only: a change goes into a new migration, never here.
 */
const SUPERSEDED_CHECKSUMS: ReadonlyMap<number, readonly string[]> = new Map([
  [3, ['27efae74d892d6e68aaab5f1772e3f3fa7aa416b0d0769b7d1828f31f4c86858']],
]);

export async function loadMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((file) => FILE_PATTERN.test(file)).sort();
  return Promise.all(
    files.map(async (file) => {
      const [, version, name] = FILE_PATTERN.exec(file)!;
      const sql = await readFile(`${dir}/${file}`, 'utf8');
      return { version: Number(version), name: name!, sql, checksum: createHash('sha256').update(sql).digest('hex') };
    }),
  );
}

interface AppliedMigration {
  version: number;
  name: string;
  checksum: string;
}

async function appliedMigrations(db: Queryable): Promise<AppliedMigration[] | undefined> {
  const exists = await db.query<{ present: boolean }>(
    `SELECT to_regclass('public.schema_migrations') IS NOT NULL AS present`,
  );
  if (!exists.rows[0]?.present) return undefined;
  const result = await db.query<AppliedMigration>('SELECT version, name, checksum FROM schema_migrations ORDER BY version');
  return result.rows;
}

function checkHistory(applied: AppliedMigration[], known: Migration[]): void {
  for (const row of applied) {
    const migration = known.find((candidate) => candidate.version === row.version);
    if (!migration) {
      throw new Error(`database has migration ${row.version} (${row.name}) that this build does not know; is it a newer version?`);
    }
    if (migration.checksum !== row.checksum && !SUPERSEDED_CHECKSUMS.get(row.version)?.includes(row.checksum)) {
      throw new Error(
        `migration ${row.version} (${row.name}) was changed after it was applied; restore its text and put the change in a new migration`,
      );
    }
  }
}

/** Applies pending migrations in order, all in one transaction, and records each. Returns the versions applied. */
export async function migrate(store: Store, migrations?: Migration[]): Promise<number[]> {
  const known = migrations ?? (await loadMigrations());
  return store.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_ID]);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )`);
    const applied = (await appliedMigrations(tx)) ?? [];
    checkHistory(applied, known);
    const done = new Set(applied.map((row) => row.version));
    const pending = known.filter((migration) => !done.has(migration.version));
    for (const migration of pending) {
      await tx.exec(migration.sql);
      await tx.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [
        migration.version,
        migration.name,
        migration.checksum,
      ]);
    }
    return pending.map((migration) => migration.version);
  });
}

/** A read-only store cannot migrate; it refuses to serve a schema older than this build. */
export async function assertSchemaCurrent(store: Store, migrations?: Migration[]): Promise<void> {
  const known = migrations ?? (await loadMigrations());
  const applied = (await appliedMigrations(store)) ?? [];
  checkHistory(applied, known);
  const missing = known.filter((migration) => !applied.some((row) => row.version === migration.version));
  if (missing.length > 0) {
    throw new Error(
      `the read-only database lacks migrations ${missing.map((m) => m.version).join(', ')}; run the control plane once with control_plane_store_backend "pg" to apply them`,
    );
  }
}
