import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmbeddedStore } from '../../platform/store/embedded-store.ts';
import { loadMigrations, migrate, type Migration } from '../../platform/store/migrate.ts';
import { createPgStore } from '../../platform/store/pg-store.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';
import { createEmptyTestDatabase } from '../support/database.ts';

// expected duration: ~14 s

const FIXTURES = new URL('../fixtures/migrations/', import.meta.url);
const fileName = (migration: Migration) => `${String(migration.version).padStart(4, '0')}_${migration.name}.sql`;

describe('committed migrations', () => {
  it('are append-only: each keeps the checksum it was committed with', async () => {
    const manifest = JSON.parse(await readFile(new URL('checksums.json', FIXTURES), 'utf8')) as Record<string, string>;
    const current = new Map((await loadMigrations()).map((migration) => [fileName(migration), migration.checksum]));
    for (const [file, checksum] of Object.entries(manifest)) {
      expect(
        current.get(file),
        `store/migrations/${file} changed or disappeared after it was committed, so databases that applied it refuse ` +
          'to start. Restore its text and put the change in a new migration.',
      ).toBe(checksum);
    }
    for (const file of current.keys()) {
      expect(
        file in manifest,
        `store/migrations/${file} is new: add its sha256 to test/fixtures/migrations/checksums.json, which freezes it`,
      ).toBe(true);
    }
  });
});

/** Tables, columns, constraints, indexes, triggers and functions of the public schema, in a stable order. */
async function schemaOf(db: Queryable): Promise<Record<string, string[]>> {
  const list = async (sql: string) => (await db.query<{ item: string }>(sql)).rows.map((row) => row.item);
  return {
    columns: await list(`SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' ||
        coalesce(column_default, '') AS item
      FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1`),
    constraints: await list(`SELECT c.conrelid::regclass::text || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid) AS item
      FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'public' ORDER BY 1`),
    indexes: await list(`SELECT indexdef AS item FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1`),
    triggers: await list(`SELECT t.tgrelid::regclass::text || ' ' || t.tgname AS item
      FROM pg_trigger t JOIN pg_class r ON r.oid = t.tgrelid JOIN pg_namespace n ON n.oid = r.relnamespace
      WHERE n.nspname = 'public' AND NOT t.tgisinternal ORDER BY 1`),
    functions: await list(`SELECT p.proname AS item FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = 'public' ORDER BY 1`),
  };
}

/** A migration as a database migrated by an earlier build recorded it. */
async function historical(file: string): Promise<Migration> {
  const sql = await readFile(new URL(file, FIXTURES), 'utf8');
  return { version: 3, name: 'runs', sql, checksum: createHash('sha256').update(sql).digest('hex') };
}

interface EmptyEngine {
  name: string;
  open(): Promise<{ store: Store; cleanup(): Promise<void> }>;
}

const EMPTY_ENGINES: EmptyEngine[] = [
  {
    name: 'embedded',
    async open() {
      const store = await createEmbeddedStore();
      return { store, cleanup: () => store.close() };
    },
  },
  {
    name: 'pg',
    async open() {
      const database = await createEmptyTestDatabase();
      const store = createPgStore({ connectionString: database.url, maxConnections: 2 });
      return {
        store,
        async cleanup() {
          await store.close();
          await database.drop();
        },
      };
    },
  },
];

describe.each(EMPTY_ENGINES)('migration history on $name', (engine) => {
  const opened: Array<() => Promise<void>> = [];
  const emptyStore = async () => {
    const { store, cleanup } = await engine.open();
    opened.push(cleanup);
    return store;
  };
  let current: Migration[];
  let freshSchema: Record<string, string[]>;

  beforeAll(async () => {
    current = await loadMigrations();
    const fresh = await emptyStore();
    await migrate(fresh);
    freshSchema = await schemaOf(fresh);
  });
  afterAll(async () => {
    for (const cleanup of opened) await cleanup();
  });

  it.each([
    ['its first text', '0003_runs.original.sql'],
    ['the text it was edited to in place', '0003_runs.edited.sql'],
  ])('a database migrated by 0003 in %s starts and ends up with the current schema', async (_label, fixture) => {
    const store = await emptyStore();
    const earlierBuild = [...current.filter((migration) => migration.version < 3), await historical(fixture)];
    expect(await migrate(store, earlierBuild)).toEqual([1, 2, 3]);

    expect(await migrate(store)).toEqual(current.filter((migration) => migration.version > 3).map((m) => m.version));
    expect(await schemaOf(store)).toEqual(freshSchema);
    expect(await migrate(store)).toEqual([]);
  });

  it('0018 gives a project promoted before it its candidate\'s research contract and token budget', async () => {
    const store = await emptyStore();
    await migrate(store, current.filter((migration) => migration.version < 18));
    await store.query(
      `INSERT INTO research_candidates (candidate_id, batch_id, generation_mode, title, hypothesis, expected_artifacts, dedupe_key,
         novelty, feasibility, score, decision, expected_token_budget)
       VALUES ('cand-early', 'batch-early', 'manual_import', 'An early study', 'It holds', '["run_notes.md"]', 'early', 6, 7, 70, 'admitted', 1500)`,
    );
    await store.query(`INSERT INTO projects (project_id, project_name, project_dir, candidate_id) VALUES ('early', 'Early', 'early', 'cand-early')`);
    await store.query(`INSERT INTO projects (project_id, project_name, project_dir) VALUES ('by-hand', 'By hand', 'by-hand')`);

    expect(await migrate(store)).toEqual(current.filter((migration) => migration.version >= 18).map((m) => m.version));
    const rows = await store.query('SELECT project_id, research_contract, expected_token_budget FROM projects ORDER BY project_id');
    expect(rows.rows).toEqual([
      { project_id: 'by-hand', research_contract: null, expected_token_budget: null },
      {
        project_id: 'early',
        research_contract: {
          title: 'An early study',
          hypothesis: 'It holds',
          mechanism: null,
          baseline_to_beat: null,
          success_threshold: null,
          kill_condition: null,
          expected_artifacts: ['run_notes.md'],
          required_evidence: [],
        },
        expected_token_budget: 1500,
      },
    ]);
  });

  it('accepts the superseded 0003 checksum for 0003 only', async () => {
    const store = await emptyStore();
    const edited = await historical('0003_runs.edited.sql');
    const tampered = current.map((migration) => (migration.version === 2 ? { ...migration, checksum: edited.checksum } : migration));
    await migrate(store, tampered);
    await expect(migrate(store)).rejects.toThrow(/migration 2 \(research_facility\) was changed after it was applied/);
  });
});
