import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { temporalNames } from '../support/temporal-names.ts';

/**
 * The names Temporal keeps (workflow types, signal, update and query names, activities per task queue, patch ids,
 * task queues, schedule ids, search attributes, workflow id formats) and the OpenAPI operationIds clients call, frozen
 * in test/fixtures/temporal-names.json. Moving or renaming a module must leave them all as they are: a workflow in
 * flight replays on the new code by these names. The file is edited by hand, never re-captured: a change there is a
 * deliberate change of a name, with a patch or a migration of what Temporal holds.
 */

const FROZEN = JSON.parse(readFileSync(new URL('../fixtures/temporal-names.json', import.meta.url), 'utf8')) as ReturnType<typeof temporalNames>;

describe('names Temporal sees', () => {
  const current = temporalNames();

  it.each(Object.keys(FROZEN))('%s are the frozen ones', (kind) => {
    expect(current[kind as keyof typeof FROZEN]).toStrictEqual(FROZEN[kind as keyof typeof FROZEN]);
  });

  it('nothing is gathered that the frozen file lacks', () => {
    expect(Object.keys(current)).toStrictEqual(Object.keys(FROZEN));
  });
});
