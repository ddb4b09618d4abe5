import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { DISPATCH_BLOCKERS, ITEM_WAITS, LANE_WAITS, RUN_WAITS } from '../../capabilities/console/domain/stall-reasons.ts';
import { readWhyNothingMoves, WHY_ITEMS, WHY_RUNS } from '../../capabilities/console/why-nothing-moves.ts';
import { RUN_STATES } from '../../capabilities/runs/domain/run-state.ts';
import { errorResponses, type Assert, type Documents } from '../../platform/http/responses.ts';
import type { AppDeps } from '../deps.ts';

const reason = z.string().describe('Why, in words, with what would change it');

const WhyAnswer = z.object({
  checked_at: z.string(),
  summary: z.string().describe('One sentence: whether anything can go now, and what holds the rest'),
  blockers: z
    .array(z.object({ kind: z.enum(DISPATCH_BLOCKERS), reason }))
    .describe('What stops every dispatch now, whatever the item; empty when dispatch is open'),
  items: z
    .array(
      z.object({
        project_id: z.string(),
        project_name: z.string(),
        lane: z.string().nullable().describe('The free lane it would go to; null when none of its target is free, or it has none'),
        kind: z.enum(ITEM_WAITS).describe('dispatchable: the next dispatch takes it; anything else names what holds it'),
        reason,
      }),
    )
    .describe(`The first ${WHY_ITEMS} queued items in dispatch order, flagged ones included: those the next dispatches would consider`),
  lanes: z
    .array(
      z.object({
        lane: z.string(),
        machine_target: z.string(),
        run_id: z.string().nullable().describe('The run holding the lane; null while it is free'),
        project_id: z.string().nullable().describe('The item running there, or the item that goes (or waits) there next'),
        kind: z.enum(LANE_WAITS).describe('ready: idle, and the next dispatch takes an item there; waiting: idle, but its first item cannot go; no_work: idle, nothing routes to it'),
        reason,
      }),
    )
    .describe('Every configured lane (each slot of each worker target)'),
  runs: z
    .array(
      z.object({
        run_id: z.string(),
        project_id: z.string(),
        lane: z.string(),
        state: z.enum(RUN_STATES),
        kind: z.enum(RUN_WAITS).describe('question and overdue wait for a person; the others for the agent, its gate or the usage limit'),
        reason,
      }),
    )
    .describe(`The runs not finished yet, oldest first (at most ${WHY_RUNS}), and why each has not finished`),
  queue: z.object({
    queued: z.number().int(),
    last_moved_at: z.string().nullable().describe('When a run last started or ended (before any run, when the oldest queued item was queued); null when nothing waited yet'),
  }),
});
export type WhyDocumented = Assert<Documents<typeof WhyAnswer, Awaited<ReturnType<typeof readWhyNothingMoves>>>>;

export async function whyRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'dispatch' | 'pump'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/control/api/v1/why',
    {
      config: { auth: 'control' },
      schema: {
        tags: ['read models'],
        summary: 'Why nothing moves: for the queued items the next dispatch would consider, every lane and every active run, what holds it',
        querystring: z.strictObject({}),
        response: { 200: WhyAnswer, ...errorResponses(401, 422, 503) },
      },
    },
    async () => readWhyNothingMoves({ reads: deps.store.reads, readOnly: deps.store.readOnly, dispatch: deps.dispatch, pump: deps.pump }),
  );
}
