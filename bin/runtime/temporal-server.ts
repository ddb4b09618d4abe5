import { join } from 'node:path';
import { cacheRoot } from './temporal-cli.ts';

/**
 * The real Temporal server that scripts/install-temporal-server.sh builds into the user cache, with its SQL schema tool
 * and the server's Postgres schema files, for a Temporal of its own on Postgres (README "Running on several machines").
 * docker-compose.yml's temporalio images carry the same version (test/temporal-server-install.test.ts holds them in step).
 */
export const TEMPORAL_SERVER_VERSION = '1.31.0';

type Env = Record<string, string | undefined>;

export interface TemporalServerInstall {
  dir: string;
  server: string;
  sqlTool: string;
  /** Versioned schema folders: `<schemaDir>/temporal/versioned` and `<schemaDir>/visibility/versioned`. */
  schemaDir: string;
}

export function temporalServerInstall(env: Env = process.env): TemporalServerInstall {
  const dir = join(cacheRoot(env), `temporal-server-${TEMPORAL_SERVER_VERSION}`);
  return { dir, server: join(dir, 'temporal-server'), sqlTool: join(dir, 'temporal-sql-tool'), schemaDir: join(dir, 'schema', 'postgresql', 'v12') };
}

export const TEMPORAL_SERVER_INSTALL_HINT = `Install it with: bash scripts/install-temporal-server.sh  (needs Go; builds the Temporal server v${TEMPORAL_SERVER_VERSION} and its SQL tool into the user cache, a few minutes the first time)`;
