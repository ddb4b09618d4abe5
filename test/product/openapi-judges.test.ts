import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';

// expected duration: ~40 s

/**
 * The served OpenAPI documents judged by linters no one here wrote: Spectral with its `spectral:oas` ruleset, unchanged,
 * and Redocly CLI with its recommended rules, as redocly.yaml sets them. Two documents: a server with both roles (the
 * worker gate's operations are judged too) and a control plane alone, the document the typed client is generated from.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

const SHAPES = ['both roles', 'control plane'] as const;
type Shape = (typeof SHAPES)[number];

type Schema = Record<string, unknown>;
interface Answer {
  content?: Record<string, { schema?: Schema }>;
}
interface Document {
  paths: Record<string, Record<string, { responses?: Record<string, Answer> }>>;
  components?: { schemas?: Record<string, Schema> };
}

const apps: TestApp[] = [];
let dir: string;
const documentPaths = {} as Record<Shape, string>;
const served = {} as Record<Shape, Document>;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'rcp-openapi-'));
  // spectral:oas as Spectral ships it: no rule turned off or changed.
  writeFileSync(join(dir, 'spectral-oas.yaml'), 'extends: ["spectral:oas"]\n');
  for (const shape of SHAPES) {
    const t = await startTestApp({}, { workerGate: shape === 'both roles' });
    apps.push(t);
    const response = await t.app.inject({ method: 'GET', url: '/control/api/openapi.json', headers: t.auth });
    expect(response.statusCode).toBe(200);
    documentPaths[shape] = join(dir, `${shape.replace(' ', '-')}.json`);
    writeFileSync(documentPaths[shape], response.body);
    served[shape] = JSON.parse(response.body) as Document;
  }
}, 120_000);
afterAll(async () => {
  for (const t of apps) await t.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface SpectralFinding {
  code: string;
  severity: number;
  message: string;
  path: string[];
}

const COMPONENT = '#/components/schemas/';
const ERROR_BODY = `${COMPONENT}ErrorBody`;

/** The keywords that give a schema a type: anything else (`{}`, a description alone) admits every value. */
const TYPING = ['type', '$ref', 'anyOf', 'oneOf', 'allOf', 'enum', 'const', 'not'];

/**
 * Every place in an answer's schema that admits any value: a schema with no type, or an object whose other fields may
 * be anything (`additionalProperties` absent, `true` or `{}`). Components are followed, each once.
 */
function untypedLeaves(document: Document, schema: Schema, at: string, seen: Set<string>, found: string[]): string[] {
  if (typeof schema.$ref === 'string') {
    const name = schema.$ref.slice(COMPONENT.length);
    if (!seen.has(name)) untypedLeaves(document, document.components?.schemas?.[name] ?? {}, `${at} → ${name}`, new Set([...seen, name]), found);
    return found;
  }
  if (!TYPING.some((keyword) => keyword in schema)) return [...found, `${at}: no type`];
  for (const keyword of ['anyOf', 'oneOf', 'allOf'] as const) {
    ((schema[keyword] ?? []) as Schema[]).forEach((branch, index) => untypedLeaves(document, branch, `${at}.${keyword}[${index}]`, seen, found));
  }
  for (const [name, property] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) untypedLeaves(document, property, `${at}.${name}`, seen, found);
  if (schema.items) untypedLeaves(document, schema.items as Schema, `${at}[]`, seen, found);
  const isObject = schema.type === 'object' || (Array.isArray(schema.type) && schema.type.includes('object'));
  const rest = schema.additionalProperties;
  if (isObject && (rest === undefined || rest === true)) found.push(`${at}: other fields of any type`);
  if (rest !== null && typeof rest === 'object') {
    if (Object.keys(rest).length === 0) found.push(`${at}: other fields of any type`);
    else untypedLeaves(document, rest as Schema, `${at}.*`, seen, found);
  }
  return found;
}

/** Every answer schema of the document, by operation and status. */
const answerSchemas = (document: Document) =>
  Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods).flatMap(([method, operation]) =>
      Object.entries(operation.responses ?? {}).flatMap(([status, answer]) =>
        Object.values(answer.content ?? {}).map((media) => ({ at: `${method.toUpperCase()} ${path} ${status}`, path, status, schema: media.schema ?? {} })),
      ),
    ),
  );

describe.each(SHAPES)('the OpenAPI document of a server with %s before outside judges', (shape) => {
  it('has no Spectral finding of any severity under spectral:oas, unchanged', { timeout: 120_000 }, async () => {
    const spectral = join(ROOT, 'node_modules', '.bin', 'spectral');
    const args = ['lint', '--ruleset', join(dir, 'spectral-oas.yaml'), '--format', 'json', '--fail-severity', 'hint', '--quiet', documentPaths[shape]];
    // Spectral exits non-zero when it finds anything; its findings are on stdout either way.
    const { stdout } = await run(spectral, args, { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 }).catch((error: { stdout?: string; stderr?: string }) => {
      if (!error.stdout) throw new Error(`spectral did not run: ${error.stderr ?? String(error)}`);
      return { stdout: error.stdout };
    });
    const findings = (stdout.trim() ? JSON.parse(stdout) : []) as SpectralFinding[];
    expect(findings.map(({ code, message, path }) => `${code} at ${path.join('.')}: ${message}`)).toEqual([]);
  });

  it('has no Redocly problem under its recommended rules, as the committed redocly.yaml sets them', { timeout: 120_000 }, async () => {
    const redocly = join(ROOT, 'node_modules', '.bin', 'redocly');
    const args = ['lint', '--config', join(ROOT, 'redocly.yaml'), '--format', 'json', documentPaths[shape]];
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
    // Redocly exits non-zero on an error; its report is on stdout either way.
    const { stdout } = await run(redocly, args, { cwd: dir, env, maxBuffer: 64 * 1024 * 1024 }).catch((error: { stdout?: string; stderr?: string }) => {
      if (!error.stdout) throw new Error(`redocly did not run: ${error.stderr ?? String(error)}`);
      return { stdout: error.stdout };
    });
    const report = JSON.parse(stdout) as { problems: { ruleId: string; message: string; location: { pointer: string }[] }[] };
    expect(report.problems.map(({ ruleId, message, location }) => `${ruleId} at ${location[0]?.pointer}: ${message}`)).toEqual([]);
  });

  it('gives every operation a 2xx answer but the two redirects (the rule redocly.yaml turns off)', () => {
    const without2xx = Object.entries(served[shape].paths).flatMap(([path, methods]) =>
      Object.entries(methods)
        .filter(([, operation]) => operation.responses && !Object.keys(operation.responses).some((status) => /^2/.test(status)))
        .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    expect(without2xx.sort()).toEqual(['GET /control/dashboard', 'GET /dashboard', 'HEAD /control/dashboard', 'HEAD /dashboard']);
  });

  it('types every part of every answer: no schema admits any value, no object any other field', () => {
    const document = served[shape];
    const untyped = answerSchemas(document).flatMap(({ at, schema }) => untypedLeaves(document, schema, at, new Set(), []));
    expect(untyped).toEqual([]);
  });

  it('names the error shape once, as the ErrorBody component, and every error answer refers to it', () => {
    const document = served[shape];
    const components = document.components?.schemas ?? {};
    // The error shape is written out once: its list of validation problems appears in ErrorBody alone, in the
    // components and in the operations.
    const problemList = `${COMPONENT}ValidationProblem`;
    expect(Object.entries(components).filter(([, schema]) => JSON.stringify(schema).includes(problemList)).map(([name]) => name)).toEqual(['ErrorBody']);
    expect(JSON.stringify(document.paths)).not.toContain(problemList);
    const errorAnswers = answerSchemas(document).filter(({ path, status }) => /^[45]/.test(status) && !(status === '503' && /health/.test(path)));
    expect(errorAnswers.length).toBeGreaterThan(500);
    // A 500's refers to it too, and requires its request_id besides.
    const refersToErrorBody = (schema: Schema) => schema.$ref === ERROR_BODY || (Array.isArray(schema.allOf) && (schema.allOf as Schema[]).some((part) => part.$ref === ERROR_BODY));
    expect(errorAnswers.filter(({ schema }) => !refersToErrorBody(schema)).map(({ at }) => at)).toEqual([]);
  });
});
