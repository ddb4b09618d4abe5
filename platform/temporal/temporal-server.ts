/**
 * The real Temporal server that scripts/install-temporal-server.sh builds into the user cache, with its SQL schema tool
 * and the server's Postgres schema files, for a Temporal of its own on Postgres (docs/operations.md#running-on-several-machines).
 * docker-compose.yml's temporalio images carry the same version (test/product/compose.test.ts holds the three in step).
 */
export const TEMPORAL_SERVER_VERSION = '1.31.0';
