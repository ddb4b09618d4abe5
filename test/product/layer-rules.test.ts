import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * The layer rules `npm run lint` enforces (docs/architecture.md#the-rules): the project keeps them, and a miniature tree that breaks
 * each one (test/fixtures/layers) is caught, directly and through chains of imports.
 */

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../..', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/layers/', import.meta.url));
const DEPCRUISE = `${REPO}node_modules/dependency-cruiser/bin/dependency-cruise.mjs`;
const PROJECT_FOLDERS = ['api', 'platform', 'capabilities', 'activities', 'workflows', 'worker-gate', 'bin', 'api-client', 'cli'];

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

async function violations(config: string, cwd: string, folders: string[]): Promise<string[]> {
  const args = [DEPCRUISE, '--config', `${REPO}${config}`, '--output-type', 'json', ...folders];
  // depcruise exits non-zero when it finds violations; the JSON report is on stdout either way.
  const { stdout } = await run(process.execPath, args, { cwd, maxBuffer: 64 * 1024 * 1024 }).catch((error: { stdout?: string }) => {
    if (!error.stdout) throw error;
    return { stdout: error.stdout };
  });
  const report = JSON.parse(stdout) as { summary: { violations: Violation[] } };
  // Built-ins keep their spelling; npm modules are named by package, wherever node_modules is.
  const name = (path: string) => path.replace(/^(\.\.\/)*node_modules\/((@[^/]+\/)?[^/]+)\/.*$/, '$2');
  return report.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${name(v.to)}`).sort();
}

describe('layer rules', () => {
  // A cruise of every source file, twice: about 10 s alone, and three times that beside other test files on two cores.
  it('hold for the project', { timeout: 120_000 }, async () => {
    expect(await violations('.dependency-cruiser.cjs', REPO, PROJECT_FOLDERS)).toEqual([]);
    expect(await violations('.dependency-cruiser-runtime.cjs', REPO, ['workflows'])).toEqual([]);
  });

  it('catch rooms and layers reaching where they may not, directly or through a chain of imports', async () => {
    const found = await violations('.dependency-cruiser.cjs', FIXTURE, ['api-client', 'api', 'capabilities', 'platform', 'worker-gate', 'workflows', 'activities', 'bin']);
    expect(found).toEqual(
      [
        'api-client-stands-alone: api-client/client.ts -> platform/http/helper.ts',
        'api-plumbing-reaches-no-ledger: api/answers.ts -> capabilities/alpha/store/ledger.ts',
        'domain-is-pure: capabilities/alpha/domain/leaky.ts -> fs',
        'gate-stands-alone: worker-gate/gate.ts -> api/answers.ts',
        'gate-stands-alone: worker-gate/gate.ts -> capabilities/alpha/domain/rule.ts',
        'gate-stands-alone: worker-gate/gate.ts -> capabilities/alpha/store/ledger.ts',
        'gate-stands-alone: worker-gate/gate.ts -> capabilities/beta/beta-service.ts',
        'only-the-composition-root-composes: api/uses-root.ts -> bin/root.ts',
        'platform-is-the-floor: platform/http/helper.ts -> api/answers.ts',
        'platform-is-the-floor: platform/http/helper.ts -> capabilities/alpha/domain/rule.ts',
        'platform-is-the-floor: platform/http/helper.ts -> capabilities/alpha/store/ledger.ts',
        'platform-is-the-floor: platform/http/helper.ts -> capabilities/beta/beta-service.ts',
        'rooms-below-the-layers: capabilities/beta/beta-service.ts -> api/answers.ts',
        // api/alpha/ reads its own room's ledger: allowed; beta reaches into alpha's: not.
        'rooms-meet-through-their-surface: capabilities/beta/beta-service.ts -> capabilities/alpha/store/ledger.ts',
        'rooms-start-workflows-not-activities: capabilities/alpha/alpha-service.ts -> activities/record.ts',
        'routes-are-adapters: api/uses-root.ts -> bin/root.ts',
      ].sort(),
    );
  });

  it('keep workflows to the SDK, the rooms\' domain/ and type imports of activities', async () => {
    const found = await violations('.dependency-cruiser-runtime.cjs', FIXTURE, ['workflows']);
    expect(found).toEqual(
      [
        'workflows-are-deterministic: workflows/bad.ts -> activities/record.ts',
        'workflows-are-deterministic: workflows/bad.ts -> child_process',
        'workflows-are-deterministic: workflows/bad.ts -> fs/promises',
        'workflows-are-deterministic: workflows/bad.ts -> @temporalio/client',
        'workflows-are-deterministic: workflows/bad.ts -> pg',
        'workflows-are-deterministic: workflows/indirect.ts -> fs',
        'workflows-are-deterministic: workflows/private-ledger.ts -> capabilities/alpha/store/ledger.ts',
      ].sort(),
    );
  });
});
