import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';

// expected duration: ~20 s

/**
 * The served OpenAPI document judged by linters no one here wrote: Spectral with its `spectral:oas` rules, as the
 * committed ruleset (.spectral.yaml) sets them, and Redocly CLI with its recommended rules, as redocly.yaml sets them.
 * Both roles are served, so the worker gate's operations are judged too.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

let t: TestApp;
let dir: string;
let documentPath: string;
let served: { paths: unknown };
beforeAll(async () => {
  t = await startTestApp({}, { workerGate: true });
  const response = await t.app.inject({ method: 'GET', url: '/control/api/openapi.json', headers: t.auth });
  expect(response.statusCode).toBe(200);
  dir = mkdtempSync(join(tmpdir(), 'rcp-openapi-'));
  documentPath = join(dir, 'openapi.json');
  writeFileSync(documentPath, response.body);
  served = JSON.parse(response.body) as typeof served;
});
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface SpectralFinding {
  code: string;
  severity: number;
  message: string;
  path: string[];
}

describe('the OpenAPI document before outside judges', () => {
  it('has no Spectral finding of any severity under the committed ruleset', { timeout: 120_000 }, async () => {
    const spectral = join(ROOT, 'node_modules', '.bin', 'spectral');
    const args = ['lint', '--ruleset', join(ROOT, '.spectral.yaml'), '--format', 'json', '--fail-severity', 'hint', '--quiet', documentPath];
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
    const args = ['lint', '--config', join(ROOT, 'redocly.yaml'), '--format', 'json', documentPath];
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
    const without2xx = Object.entries(served.paths as Record<string, Record<string, { responses?: Record<string, unknown> }>>).flatMap(([path, methods]) =>
      Object.entries(methods)
        .filter(([, operation]) => operation.responses && !Object.keys(operation.responses).some((status) => /^2/.test(status)))
        .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    expect(without2xx.sort()).toEqual(['GET /control/dashboard', 'GET /dashboard', 'HEAD /control/dashboard', 'HEAD /dashboard']);
  });
});
