import { status } from '@grpc/grpc-js';
import { isGrpcServiceError, type Connection } from '@temporalio/client';
import { PROJECT_ID_ATTRIBUTE, QUEUE_STATUS_ATTRIBUTE } from '../../workflows/messages.ts';

/** temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD */
const INDEXED_VALUE_TYPE_KEYWORD = 2;

/**
 * Registers the run workflows' custom search attributes on the namespace, so the Temporal UI can filter runs by
 * project and queue status. Idempotent; another process registering them at the same moment is fine.
 */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<void> {
  const wanted = [PROJECT_ID_ATTRIBUTE.name, QUEUE_STATUS_ATTRIBUTE.name];
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
}
