import { status } from '@grpc/grpc-js';
import { isGrpcServiceError, type Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { SEARCH_ATTRIBUTES } from '../../workflows/messages.ts';

/** temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD */
const INDEXED_VALUE_TYPE_KEYWORD = 2;

/**
 * How long a server takes to use attributes just added: its services read a namespace's attribute names from a cache
 * they refresh every `system.namespaceCacheRefreshInterval` (2 s by default), and a workflow started before then is
 * refused ("Namespace default has no mapping defined for search attribute cycle_id").
 */
const NAMESPACE_CACHE_REFRESH_MS = 3_000;

/**
 * Registers the workflows' custom search attributes on the namespace, so the Temporal UI can filter by project, queue
 * status, paper and cycle, and answers once the server uses them. Idempotent; another process registering them at the
 * same moment is fine.
 */
export async function ensureSearchAttributes(connection: Pick<Connection | NativeConnection, 'operatorService'>, namespace: string): Promise<void> {
  const wanted = SEARCH_ATTRIBUTES.map((attribute) => attribute.name);
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = wanted.filter((name) => !(name in (existing.customAttributes ?? {})));
  if (missing.length === 0) return;
  try {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((name) => [name, INDEXED_VALUE_TYPE_KEYWORD])),
    });
  } catch (error) {
    if (!(isGrpcServiceError(error) && error.code === status.ALREADY_EXISTS)) throw error;
  }
  await new Promise((resolve) => setTimeout(resolve, NAMESPACE_CACHE_REFRESH_MS));
}
