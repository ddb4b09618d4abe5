import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { databaseUrl, quoteIdent, withAdminClient } from './postgres.ts';

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/**
 * The connections a test's Temporal server (scripts/cluster) opens per service and database: every test file shares one
 * Postgres of 100 connections, and two clusters at their defaults (up to 96 each) once took all of them.
 */
export const TEST_TEMPORAL_SQL_CONNECTIONS = { main: 5, visibility: 2 };

const TEMPLATE_BUSY = '55006'; // object_in_use: another clone is copying the template right now

const handle = (name: string): TestDatabase => ({
  name,
  url: databaseUrl(name),
  drop: () => withAdminClient(async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
  }),
});

/** A database with no schema at all (not even schema_migrations); the run's teardown drops it if a test does not. */
export async function createEmptyTestDatabase(): Promise<TestDatabase> {
  const name = `${inject('pgTemplateDatabase')}_empty_${randomBytes(4).toString('hex')}`;
  await withAdminClient(async (client) => {
    await client.query(`CREATE DATABASE ${quoteIdent(name)}`);
  });
  return handle(name);
}

/** A fresh database cloned from the migrated template the global setup prepared. One per test file. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const template = inject('pgTemplateDatabase');
  const name = `${template}_${randomBytes(4).toString('hex')}`;
  await withAdminClient(async (client) => {
    for (let attempt = 0; ; attempt += 1) {
      try {
        await client.query(`CREATE DATABASE ${quoteIdent(name)} TEMPLATE ${quoteIdent(template)}`);
        return;
      } catch (error) {
        if ((error as { code?: string }).code !== TEMPLATE_BUSY || attempt >= 20) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100 + attempt * 50));
      }
    }
  });
  return handle(name);
}
