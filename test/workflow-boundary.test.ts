import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { findWorkflowBoundaryViolations } from '../scripts/check-workflow-boundary.ts';

const fixture = fileURLToPath(new URL('./fixtures/workflow-boundary/workflows/', import.meta.url));
const projectWorkflows = fileURLToPath(new URL('../workflows/', import.meta.url));

describe('workflow determinism boundary', () => {
  it('flags Node built-ins, I/O libraries and value imports of activities', () => {
    const found = findWorkflowBoundaryViolations(fixture).map((v) => `${v.file.split('/').pop()} ${v.specifier}`);
    expect(found.sort()).toEqual(
      [
        'bad.ts node:fs/promises',
        'bad.ts crypto',
        'bad.ts pg',
        'bad.ts ../activities/index.ts',
        'bad.ts @temporalio/client',
        'bad.ts child_process',
      ].sort(),
    );
  });

  it('allows the workflow SDK and type-only imports of activities', () => {
    const good = findWorkflowBoundaryViolations(fixture).filter((v) => v.file.endsWith('good.ts'));
    expect(good).toEqual([]);
  });

  it('holds for the project workflows/ folder', () => {
    expect(findWorkflowBoundaryViolations(projectWorkflows)).toEqual([]);
  });
});
