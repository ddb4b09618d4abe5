import { readFileSync } from 'node:fs';
import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { OpenAPIV3_1 } from 'openapi-types';
import { errorAnswerDescription, ErrorBodySchema, errorResponses, foreignObject, type ErrorStatus } from '../platform/http/responses.ts';
import { SAFE_METHODS, type AuthKind } from './auth.ts';
import { SERVICE_NAME } from '../platform/service-name.ts';
import { operationIdOf } from './operation-ids.ts';

const OPENAPI_PATH = '/control/api/openapi.json';

const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

type SecurityRequirement = Record<string, string[]>;

/** The credentials a route of each auth kind takes, as OpenAPI security requirements (any one of them suffices). */
function securityFor(kind: AuthKind | undefined, method: string, sessions: boolean): SecurityRequirement[] {
  const session: SecurityRequirement[] = !sessions
    ? []
    : [SAFE_METHODS.has(method) ? { dashboard_session: [] } : { dashboard_session: [], csrf_token: [] }];
  switch (kind) {
    case 'public':
      return [];
    case 'gate':
      return [{ gate_bearer: [] }];
    case 'agent_event':
      return [{ agent_run_bearer: [] }, { control_bearer: [] }];
    case 'callback':
      return [{ callback_bearer: [] }];
    default:
      return [{ control_bearer: [] }, ...session];
  }
}

/** Who may call a route of each auth kind, in words, for its operation's description. */
const CREDENTIALS_IN_WORDS: Readonly<Record<AuthKind, string>> = {
  public: 'Anyone may call it: it takes no credentials.',
  control: 'Takes the control API token, or a dashboard session (with its CSRF token on anything but a read).',
  gate: 'Takes the worker gate\'s token (worker_wake_gate_bearer_token).',
  agent_event: 'Takes the token the gate gave the run\'s agent, for a body that names that run, or the control API token.',
  callback: 'Takes the completion callback token only.',
};

/**
 * An operation's description: the route's own, else what its definition says: its summary, who may call it, and how
 * its errors are written.
 */
function operationDescription(schema: { summary?: string; description?: string }, kind: AuthKind | undefined): string {
  if (schema.description) return schema.description;
  const summary = schema.summary ? `${schema.summary.replace(/[.;:,]$/, '')}. ` : '';
  return `${summary}${CREDENTIALS_IN_WORDS[kind ?? 'control']} Errors are answered as ErrorBody, {"detail": ...}.`;
}

/**
 * Every error answer refers to the one ErrorBody component, with the description of its status; a 500's also
 * requires its request_id.
 */
function withErrorAnswers(response: unknown, zodResponse: unknown): unknown {
  if (response === null || typeof response !== 'object' || zodResponse === null || typeof zodResponse !== 'object') return response;
  const zodAnswers = zodResponse as Record<string, unknown>;
  return Object.fromEntries(
    Object.entries(response).map(([status, schema]) => {
      if (zodAnswers[status] !== ErrorBodySchema) return [status, schema];
      const description = errorAnswerDescription(Number(status) as ErrorStatus);
      return [status, status === '500' ? { description, allOf: [schema], required: ['detail', 'request_id'] } : { ...(schema as object), description }];
    }),
  );
}

/** The groups operations are listed under. */
const TAGS: Readonly<Record<string, string>> = {
  meta: 'This document',
  health: 'Liveness and readiness',
  observability: 'Metrics, the route log and memory',
  status: 'Dispatch safety and queue health',
  events: 'The append-only audit log',
  session: 'Dashboard sessions',
  research: 'The Research Facility: candidates, admissions, provider batches, follow-ups and bounded cycles',
  queues: 'Queue reads',
  operator: 'Operator commands: pause, resume, park, requeue, alerts',
  dispatch: 'Preflight, dispatch and worker callbacks',
  runs: 'Runs and their cancellation',
  papers: 'Papers and drafting',
  'paper reviews': 'Review, checklist, rewrite, finalization and corpus import of papers',
  'read models': 'Bounded v1 reads for the dashboard and clients: lists by cursor and details',
  core: 'Core: queue snapshots and their projection',
  dashboard: 'The operator dashboard',
  'worker-gate': 'The worker gate role',
};

type HeaderSpec = { description: string; type: 'string' | 'integer' };

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Response headers a route sets itself, by status, for the OpenAPI document (the global ones are added). */
    answerHeaders?: Record<number, Record<string, HeaderSpec>>;
  }
}

const REQUEST_ID_HEADER: Record<string, HeaderSpec> = {
  'X-Request-Id': { type: 'string', description: 'This request\'s id in the server log and the audit trail: the caller\'s own X-Request-Id when it is a safe token, else a new UUID' },
};

/** Headers of the global answers (docs/http.md#http-conventions). */
const STATUS_HEADERS: Record<number, Record<string, HeaderSpec>> = {
  401: { 'WWW-Authenticate': { type: 'string', description: 'Bearer' } },
  429: { 'Retry-After': { type: 'integer', description: 'Seconds until this client may try again' } },
};

/** Every answer's headers: X-Request-Id always, the global ones of its status, and those the route sets itself. */
function withAnswerHeaders(response: unknown, own: Record<number, Record<string, HeaderSpec>> = {}): unknown {
  if (response === null || typeof response !== 'object') return response;
  return Object.fromEntries(
    Object.entries(response).map(([status, schema]) => [
      status,
      { ...(schema as object), headers: { ...REQUEST_ID_HEADER, ...STATUS_HEADERS[Number(status)], ...own[Number(status)] } },
    ]),
  );
}

type Operation = { requestBody?: { required?: boolean; content?: Record<string, { schema?: object }> } };

/** A body schema with a default may be left out (the plugin marks every body required). */
function markOptionalBodies(document: OpenAPIV3_1.Document): OpenAPIV3_1.Document {
  for (const path of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(path ?? {}) as Operation[]) {
      const body = operation?.requestBody;
      if (body && Object.values(body.content ?? {}).some((media) => media.schema !== undefined && 'default' in media.schema)) {
        body.required = false;
      }
    }
  }
  return document;
}

type Answer = { description: string; headers?: object; content?: object };
type ReadOperation = { summary?: string; operationId?: string; responses?: Record<string, Answer> };

/** Fastify answers HEAD for every GET route: the same statuses and headers, no body. */
function documentHead(document: OpenAPIV3_1.Document): OpenAPIV3_1.Document {
  for (const path of Object.values(document.paths ?? {}) as Record<string, ReadOperation>[]) {
    const read = path.get;
    if (!read || path.head) continue;
    const responses = Object.fromEntries(Object.entries(read.responses ?? {}).map(([status, { content: _body, ...answer }]) => [status, answer]));
    path.head = { ...read, operationId: `${read.operationId}Headers`, summary: `${read.summary ?? 'Read'} (headers only)`, responses };
  }
  return document;
}

/** The `#/components/schemas/` names a part of the document refers to. */
function referencedSchemas(node: unknown, found: Set<string>): Set<string> {
  if (Array.isArray(node)) for (const item of node) referencedSchemas(item, found);
  else if (node !== null && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string' && value.startsWith('#/components/schemas/')) found.add(value.slice('#/components/schemas/'.length));
      else referencedSchemas(value, found);
    }
  }
  return found;
}

/**
 * Keeps the component schemas the operations refer to, directly or through other components (every named schema is
 * also generated in an input form, which the answers do not use), and the security schemes an operation takes.
 */
function withoutUnusedComponents(document: OpenAPIV3_1.Document): OpenAPIV3_1.Document {
  const schemas = document.components?.schemas ?? {};
  const used = referencedSchemas(document.paths, new Set());
  for (let pending = [...used]; pending.length > 0; ) {
    const before = used.size;
    referencedSchemas(pending.map((name) => schemas[name]), used);
    pending = [...used].slice(before);
  }
  const operations = Object.values(document.paths ?? {}).flatMap((path) => Object.values(path ?? {})) as { security?: SecurityRequirement[] }[];
  const schemes = new Set(operations.flatMap((operation) => (operation.security ?? []).flatMap((requirement) => Object.keys(requirement))));
  const pick = <T>(all: Record<string, T> | undefined, keep: Set<string>) => Object.fromEntries(Object.entries(all ?? {}).filter(([name]) => keep.has(name)).sort(([a], [b]) => a.localeCompare(b)));
  return { ...document, components: { ...document.components, schemas: pick(schemas, used), securitySchemes: pick(document.components?.securitySchemes, schemes) } };
}

const OpenApiDocumentSchema = foreignObject('The OpenAPI 3.1 document of this server: its shape is the OpenAPI Specification\'s');

/**
 * Collects every route registered after it into an OpenAPI 3.1 document generated from the route schemas, and serves
 * that document. Register it before the routes it describes.
 */
export async function openApiDocument(app: FastifyInstance, options: { controlPlane: boolean; workerGate: boolean }): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: SERVICE_NAME,
        version,
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
        contact: { name: `${SERVICE_NAME} maintainers` },
        description: `Every route states the credentials it takes; errors are {"detail": ...} (docs/http.md#http-conventions).${
          options.workerGate ? ' This server also serves the worker gate role.' : ''
        }`,
      },
      // Relative: the document is served by the server it describes, whatever address a client reached it at.
      servers: [{ url: '/', description: 'The server that serves this document' }],
      tags: Object.entries(TAGS)
        .filter(([name]) => options.workerGate || name !== 'worker-gate')
        .map(([name, description]) => ({ name, description })),
      components: {
        securitySchemes: {
          control_bearer: { type: 'http', scheme: 'bearer', description: 'control_api_bearer_token' },
          gate_bearer: { type: 'http', scheme: 'bearer', description: 'worker_wake_gate_bearer_token (worker gate routes)' },
          callback_bearer: { type: 'http', scheme: 'bearer', description: 'completion_callback_token (worker callbacks)' },
          agent_run_bearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'GATE_EVENT_TOKEN: the token the gate gives one run\'s agent, good for that run\'s events while the run is live',
          },
          dashboard_session: { type: 'apiKey', in: 'cookie', name: 'cp_session', description: 'Dashboard session from POST /control/api/session' },
          csrf_token: { type: 'apiKey', in: 'header', name: 'X-CSRF-Token', description: 'csrf_token of the dashboard session, on anything but reads' },
        },
      },
    },
    transform: (input) => {
      const transformed = jsonSchemaTransform(input);
      const method = [input.route.method].flat()[0] ?? 'GET';
      const { config } = input.route;
      const openApiPath = input.url.replace(/:([A-Za-z_]+)/g, '{$1}');
      return {
        ...transformed,
        schema: {
          ...transformed.schema,
          ...(method === 'HEAD' ? {} : { operationId: operationIdOf(method, openApiPath) }),
          description: operationDescription(input.schema as { summary?: string; description?: string }, config?.auth),
          security: securityFor(config?.auth, method, options.controlPlane),
          response: withAnswerHeaders(withErrorAnswers(transformed.schema.response, input.schema.response), config?.answerHeaders),
        },
      };
    },
    transformObject: (document) => withoutUnusedComponents(documentHead(markOptionalBodies(jsonSchemaTransformObject(document) as OpenAPIV3_1.Document))),
  });

  app.withTypeProvider<ZodTypeProvider>().get(
    OPENAPI_PATH,
    {
      config: { auth: 'control' },
      schema: { tags: ['meta'], summary: 'This document', response: { 200: OpenApiDocumentSchema, ...errorResponses(401) } },
    },
    // The plugin types its answer as any Swagger or OpenAPI version; it was configured for 3.1 above.
    async () => app.swagger() as OpenAPIV3_1.Document & { paths: object; components: object },
  );
}
