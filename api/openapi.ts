import { readFileSync } from 'node:fs';
import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { OpenAPIV3_1 } from 'openapi-types';
import { z } from 'zod';
import { anyObject, errorResponses, openObject } from '../http/responses.ts';
import { SAFE_METHODS, type AuthKind } from './auth.ts';
import { SERVICE_NAME } from './deps.ts';

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

const OpenApiDocumentSchema = openObject({
  openapi: z.string(),
  info: openObject({ title: z.string(), version: z.string() }),
  paths: anyObject(),
  components: anyObject(),
}).describe('The OpenAPI 3.1 document of this server');

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
        description: `Every route states the credentials it takes; errors are {"detail": ...} (README "HTTP conventions").${
          options.workerGate ? ' This server also serves the worker gate role.' : ''
        }`,
      },
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
      return { ...transformed, schema: { ...transformed.schema, security: securityFor(input.route.config?.auth, method, options.controlPlane) } };
    },
    transformObject: (document) => markOptionalBodies(('openapiObject' in document ? document.openapiObject : {}) as OpenAPIV3_1.Document),
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
