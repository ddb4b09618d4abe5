import { z } from 'zod';
import { doc, isPostgresUrl, nonEmptyText, text } from './field-kinds.ts';

export const STORE_BACKENDS = ['embedded', 'pg', 'pg_readonly'] as const;

/** The platform's fields of the store: the state directory, the engine, the Postgres URL. */
export const storeFields = {
  state_dir: doc(nonEmptyText(), {
    perReplica: true,
    description: 'Directory for service state (embedded database, Temporal dev server, gate records). Relative paths resolve against the config file directory.',
  }),
  control_plane_store_backend: doc(z.enum(['embedded', 'pg', 'pg_readonly', 'sqlite']).default('embedded'), {
    description: 'embedded: in-process Postgres files under state_dir (sqlite is an alias); pg: Postgres at pg_database_url; pg_readonly: reads only, writes answer 501.',
  }),
  pg_database_url: doc(
    text()
      .refine((v) => v === '' || isPostgresUrl(v), 'must be a postgres:// or postgresql:// URL')
      .meta({ title: 'postgres:// URL' })
      .default(''),
    { perReplica: true, description: 'Postgres URL; required for pg and pg_readonly.', secret: true },
  ),
};
