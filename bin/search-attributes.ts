import { status } from '@grpc/grpc-js';
import { isGrpcServiceError, type Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { SEARCH_ATTRIBUTES } from '../workflows/runs/run-messages.ts';

/** temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD */
const INDEXED_VALUE_TYPE_KEYWORD = 2;

/**
 * How long a server takes to use attributes just added: its services read a namespace's attribute names from a cache
 * they refresh every `system.namespaceCacheRefreshInterval` (2 s by default), and a workflow started before then is
 * refused ("Namespace default has no mapping defined for search attribute cycle_id").
 */
const NAMESPACE_CACHE_REFRESH_MS = 3_000;

/**
 * The server answered, but will not let this client register search attributes: Temporal Cloud keeps them out of the
 * operator API, and a self-hosted server may authorize it to admins only. The message names the missing attributes and
 * the commands that add them, once, from an account allowed to.
 */
export class SearchAttributesRefusedError extends Error {
  constructor(namespace: string, missing: readonly string[], cause: Error) {
    // The native connection's errors carry the server's message in `message` ("7 PERMISSION_DENIED: …"), not `details`.
    const said = (isGrpcServiceError(cause) && cause.details) || cause.message.replace(/^\d+ [A-Z_]+: /, '');
    const reason = said.split('\n')[0];
    super(
      `the Temporal namespace "${namespace}" lacks the search attributes ${missing.join(', ')} (Keyword), and the server refused to add them ` +
        `(${status[(cause as { code?: number }).code ?? -1] ?? 'refused'}: ${reason}). Add them once, then start again: ${howToAdd(namespace, missing)}`,
      { cause },
    );
    this.name = 'SearchAttributesRefusedError';
  }
}

/** The commands that add the attributes, from an account allowed to. */
export function howToAdd(namespace: string, names: readonly string[]): string {
  const tcld = names.map((name) => `--search-attribute ${name}=Keyword`).join(' ');
  const cli = names.map((name) => `--name ${name} --type Keyword`).join(' ');
  return (
    `on Temporal Cloud \`tcld namespace search-attributes add --namespace ${namespace} ${tcld}\` or the Cloud UI (Namespaces, ${namespace}, Custom Search Attributes); ` +
    `on another server \`temporal operator search-attribute create --namespace ${namespace} ${cli}\` as an admin`
  );
}

/** The answers of a server that is up and reached but does not allow this call (Temporal Cloud's operator API). */
const isRefusal = (error: unknown) => isGrpcServiceError(error) && (error.code === status.PERMISSION_DENIED || error.code === status.UNIMPLEMENTED);

/**
 * Registers the workflows' custom search attributes on the namespace, so the Temporal UI can filter by project, queue
 * status, paper and cycle, and answers once the server uses them. Idempotent; another process registering them at the
 * same moment is fine. A server that refuses to list them (Temporal Cloud may, to this client) cannot be checked:
 * `unverified` then, for the caller to say which attributes the namespace needs and how to add them.
 */
export async function ensureSearchAttributes(connection: Pick<Connection | NativeConnection, 'operatorService'>, namespace: string): Promise<'present' | 'unverified'> {
  const wanted = SEARCH_ATTRIBUTES.map((attribute) => attribute.name);
  let existing;
  try {
    existing = await connection.operatorService.listSearchAttributes({ namespace });
  } catch (error) {
    if (isRefusal(error)) return 'unverified';
    throw error;
  }
  const missing = wanted.filter((name) => !(name in (existing.customAttributes ?? {})));
  if (missing.length === 0) return 'present';
  try {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((name) => [name, INDEXED_VALUE_TYPE_KEYWORD])),
    });
  } catch (error) {
    if (isRefusal(error)) throw new SearchAttributesRefusedError(namespace, missing, error as Error);
    if (!(isGrpcServiceError(error) && error.code === status.ALREADY_EXISTS)) throw error;
  }
  await new Promise((resolve) => setTimeout(resolve, NAMESPACE_CACHE_REFRESH_MS));
  return 'present';
}
