import pg from 'pg';

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export const POSTGRES_HINT =
  'Postgres is not reachable at ' +
  new URL(TEST_DATABASE_URL).host +
  '. Start it with `bash scripts/ensure-postgres.sh` (or `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`), or point TEST_DATABASE_URL at a server you can create databases on.';

export function databaseUrl(name: string): string {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs fn with a client on the admin database; connection failures carry the start-Postgres hint. */
export async function withAdminClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(`${POSTGRES_HINT}\n(${(error as Error).message})`);
  }
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;
