import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CORE_LIMITS,
  compareWithLive,
  planEnforce,
  projectQueue,
  SKIP_REASONS,
  type CorePaperRow,
  type CoreQueueRow,
  type LiveQueueRow,
} from '../../capabilities/core/domain/core-snapshot.ts';
import { PAPER_STATUSES, REVIEW_STATUSES } from '../../capabilities/papers/domain/paper-status.ts';
import { isRunOwned, QUEUE_STATUSES } from '../../capabilities/runs/domain/queue-status.ts';

const projectId = fc.constantFrom(...Array.from({ length: 12 }, (_, i) => `p${i}`));
const queueRow: fc.Arbitrary<CoreQueueRow> = fc.record(
  {
    project_id: projectId,
    status: fc.constantFrom(...QUEUE_STATUSES),
    manual_review_required: fc.boolean(),
    dispatch_priority: fc.integer({ min: 0, max: 3 }),
    selection_rank: fc.integer({ min: 0, max: 3 }),
  },
  { requiredKeys: ['project_id', 'status'] },
);
const paperRow: fc.Arbitrary<CorePaperRow> = fc.record(
  {
    paper_id: fc.constantFrom(...Array.from({ length: 8 }, (_, i) => `paper-${i}`)),
    paper_status: fc.constantFrom(...PAPER_STATUSES),
    review_status: fc.constantFrom(...REVIEW_STATUSES),
  },
  { requiredKeys: ['paper_id', 'paper_status'] },
);
const liveRows: fc.Arbitrary<LiveQueueRow[]> = fc.uniqueArray(
  fc.record({
    project_id: projectId,
    status: fc.constantFrom(...QUEUE_STATUSES),
    manual_review_required: fc.boolean(),
    dispatch_priority: fc.integer({ min: 0, max: 3 }),
    selection_rank: fc.integer({ min: 0, max: 3 }),
  }),
  { selector: (row) => row.project_id },
);

describe('the Core queue projection', () => {
  it('counts each project and paper once (the last row wins), lists exactly the rows in flight, and is deterministic', () => {
    fc.assert(
      fc.property(fc.array(queueRow, { maxLength: 40 }), fc.array(paperRow, { maxLength: 20 }), (queue_rows, paper_rows) => {
        const projection = projectQueue({ queue_rows, paper_rows });
        const lastOf = new Map(queue_rows.map((row) => [row.project_id, row]));
        expect(projection.total_queue_rows).toBe(lastOf.size);
        expect(Object.values(projection.status_counts).reduce((sum, n) => sum + n, 0)).toBe(lastOf.size);
        for (const status of QUEUE_STATUSES) expect(projection.status_counts[status]).toBe([...lastOf.values()].filter((row) => row.status === status).length);
        const inFlight = [...lastOf.values()].filter((row) => isRunOwned(row.status));
        expect(projection.active_rows).toEqual(inFlight.sort((a, b) => (a.project_id < b.project_id ? -1 : 1)).slice(0, CORE_LIMITS.active_rows));
        const papers = new Map(paper_rows.map((row) => [row.paper_id, row]));
        expect(projection.total_paper_rows).toBe(papers.size);
        expect(projection.draft_candidate_count).toBe([...papers.values()].filter((paper) => paper.paper_status === 'eligible').length);
        expect(projection.draft_candidate_count + projection.polish_candidate_count).toBeLessThanOrEqual(papers.size);
        expect(projection.warnings.length > 0).toBe(lastOf.size < queue_rows.length || papers.size < paper_rows.length);
        expect(projectQueue({ queue_rows, paper_rows })).toEqual(projection);
      }),
      { numRuns: 300 },
    );
  });

  it('ignores every field a row carries beyond those Core reads, and lists none of them', () => {
    const extras = fc.dictionary(fc.constantFrom('updated_at', 'owner', 'lane', 'operator_actions'), fc.jsonValue(), { maxKeys: 3 });
    fc.assert(
      fc.property(fc.array(fc.tuple(queueRow, extras), { maxLength: 30 }), fc.array(fc.tuple(paperRow, extras), { maxLength: 15 }), (queue, papers) => {
        const plain = projectQueue({ queue_rows: queue.map(([row]) => row), paper_rows: papers.map(([row]) => row) });
        const sent = projectQueue({ queue_rows: queue.map(([row, extra]) => ({ ...extra, ...row })), paper_rows: papers.map(([row, extra]) => ({ ...extra, ...row })) });
        expect(sent).toStrictEqual(plain);
      }),
      { numRuns: 200 },
    );
  });
});

describe('enforce', () => {
  it('accounts for every snapshot row, changes only live rows not in flight, never into a status in flight', () => {
    fc.assert(
      fc.property(fc.array(queueRow, { maxLength: 30 }), liveRows, (snapshot, live) => {
        const { changes, skipped } = planEnforce(snapshot, live);
        expect(Object.keys(skipped).sort()).toEqual([...SKIP_REASONS].sort());
        expect(changes.length + Object.values(skipped).reduce((sum, n) => sum + n, 0)).toBe(snapshot.length);
        const liveById = new Map(live.map((row) => [row.project_id, row]));
        for (const change of changes) {
          const current = liveById.get(change.project_id);
          expect(current).toBeDefined();
          expect(isRunOwned(current!.status)).toBe(false);
          expect(isRunOwned(change.status)).toBe(false);
          expect(Object.keys(change.from).length).toBeGreaterThan(0);
          for (const [field, value] of Object.entries(change.from)) expect(current![field as keyof LiveQueueRow]).toBe(value);
        }
        expect(new Set(changes.map((change) => change.project_id)).size).toBe(changes.length);
      }),
      { numRuns: 300 },
    );
  });
});

describe('compare', () => {
  it('names each project whose status differs or is missing, and how many live items the snapshot leaves out', () => {
    const live: LiveQueueRow[] = [
      { project_id: 'a', status: 'queued', manual_review_required: false, dispatch_priority: 50, selection_rank: 50 },
      { project_id: 'b', status: 'running', manual_review_required: false, dispatch_priority: 50, selection_rank: 50 },
    ];
    const warnings = compareWithLive(
      [
        { project_id: 'a', status: 'queued' },
        { project_id: 'b', status: 'queued' },
        { project_id: 'c', status: 'paused' },
      ],
      live,
      { ids: ['d', 'e'], count: 7 },
    );
    expect(warnings).toEqual([
      'b: the snapshot says queued, the live queue running',
      'c: in the snapshot (paused) but not in the live queue',
      '7 live item(s) are not in the snapshot: d, e, …',
    ]);
  });
});
