import { createEmbeddedStore } from '../../platform/store/embedded-store.ts';
import { migrate } from '../../platform/store/migrate.ts';
import { openStore } from '../../platform/store/open-store.ts';
import type { Store } from '../../platform/store/store.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';

export interface EngineUnderTest {
  name: 'embedded' | 'pg';
  open(): Promise<{ store: Store; cleanup(): Promise<void> }>;
}

/** Store tests run against both engines with the same SQL: PGlite in memory and the real Postgres. */
export const ENGINES: EngineUnderTest[] = [
  {
    name: 'embedded',
    async open() {
      const store = await createEmbeddedStore();
      await migrate(store);
      return { store, cleanup: () => store.close() };
    },
  },
  {
    name: 'pg',
    async open() {
      const database: TestDatabase = await createTestDatabase();
      const store = await openStore({ backend: 'pg', pgDatabaseUrl: database.url });
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
