import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { locateTemporalCli, temporalCliInstallHint } from '../platform/temporal/temporal-cli.ts';
import { startTemporalDevServer } from '../platform/temporal/temporal-dev-server.ts';
import { loadWorkflowBundle } from '../platform/temporal/workflow-bundle.ts';
import { openStore } from '../platform/store/open-store.ts';
import { buildFakeAgentBundle } from './support/fake-agent-bundle.ts';
import { claimPortBlock } from './support/ports.ts';
import { databaseUrl, quoteIdent, withAdminClient } from './support/postgres.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    pgTemplateDatabase: string;
    temporalAddress: string;
    temporalCliPath: string;
    /** This run's block of test ports, and where each worker slot keeps its next one (test/support/ports.ts). */
    portBlock: number;
    portNextFiles: string;
  }
}

async function prepareTemplateDatabase(name: string): Promise<void> {
  await withAdminClient(async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${quoteIdent(name)}`);
  });
  const store = await openStore({ backend: 'pg', pgDatabaseUrl: databaseUrl(name) });
  await store.close();
}

async function dropRunDatabases(prefix: string): Promise<void> {
  await withAdminClient(async (client) => {
    const result = await client.query<{ datname: string }>(
      'SELECT datname FROM pg_database WHERE datname LIKE $1',
      [`${prefix}%`],
    );
    for (const row of result.rows) {
      await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(row.datname)} WITH (FORCE)`);
    }
  });
}

/** One migrated template database and one Temporal dev server for the whole run; torn down at the end. */
export default async function setup(project: TestProject) {
  // Names the Node that runs this pass (CI runs the suite on the machine's Node and on Node 24; child services follow it).
  console.log(`[global-setup] Node ${process.version} at ${process.execPath}`);
  // Unique per run so two runs on one machine never share databases.
  const template = `rcp_test_${process.pid}`;
  const temporalCliPath = locateTemporalCli();
  if (!temporalCliPath) {
    throw new Error(`The Temporal CLI was not found. Run "bash scripts/install-temporal-cli.sh" (npm test does it for you). ${temporalCliInstallHint()}`);
  }
  // The workflow bundle is cached by its sources; built here once, so the control planes that the first test files
  // start together do not each bundle the same code at the same time.
  await Promise.all([prepareTemplateDatabase(template), buildFakeAgentBundle(), loadWorkflowBundle()]);

  const temporalDir = await mkdtemp(join(tmpdir(), 'rcp-test-temporal-'));
  let server: Awaited<ReturnType<typeof startTemporalDevServer>>;
  try {
    server = await startTemporalDevServer({
      binaryPath: temporalCliPath,
      namespace: 'default',
      headless: true,
      logFile: join(temporalDir, 'dev-server.log'),
    });
  } catch (error) {
    await dropRunDatabases(template);
    throw error;
  }

  const ports = await claimPortBlock();
  project.provide('portBlock', ports.block);
  project.provide('portNextFiles', ports.nextPortFiles);
  project.provide('pgTemplateDatabase', template);
  project.provide('temporalAddress', server.address);
  project.provide('temporalCliPath', temporalCliPath);

  return async () => {
    await server.stop();
    await ports.release();
    await rm(temporalDir, { recursive: true, force: true });
    await dropRunDatabases(template);
  };
}
