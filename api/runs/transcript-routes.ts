import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorResponses, type Assert, type Documents } from '../../platform/http/responses.ts';
import { queryInt, queryOptional } from '../../platform/http/validation.ts';
import { RUN_STATES } from '../../capabilities/runs/domain/run-state.ts';
import { readTranscript, storeTranscript } from '../../capabilities/runs/run-transcripts.ts';
import { TranscriptFeed, type TranscriptSink } from '../../capabilities/runs/transcript-feed.ts';
import { TRANSCRIPT_CAPS, TranscriptEntrySchema, TranscriptPushAnswerSchema, TranscriptPushSchema } from '../../worker-gate/contract/run-transcript.ts';
import type { AppDeps } from '../deps.ts';

const RunParams = z.strictObject({ run_id: z.string().min(1).max(200) });
const SEQ_LIMITS = { min: 0, max: TRANSCRIPT_CAPS.entriesPerRun + 1, default: 0 } as const;

const TranscriptQuery = z.strictObject({
  after: queryInt(SEQ_LIMITS).describe('Entries after this seq: 0 (the default) for the first page, next_after of the previous page for the next'),
  limit: queryInt({ min: 1, max: 500, default: 200 }),
});

const TranscriptPageSchema = z.object({
  run_id: z.string(),
  run_state: z.enum(RUN_STATES),
  run_updated_at: z.string().describe("When the run's state last changed"),
  entries: z.array(TranscriptEntrySchema),
  next_after: z.number().int().describe('The seq to ask after for the next page (the `after` asked when this page is empty)'),
  has_more: z.boolean(),
});
export type TranscriptPageDocumented = Assert<Documents<typeof TranscriptPageSchema, Awaited<ReturnType<typeof readTranscript>>>>;

const StreamQuery = z.strictObject({
  after: queryInt(SEQ_LIMITS).describe('Entries after this seq; a Last-Event-ID header (an EventSource reconnecting) takes its place'),
});
const StreamHeaders = z.object({
  'last-event-id': queryOptional(z.string().regex(/^\d{1,5}$/, 'must be the seq of the last entry received')).describe('The id of the last event received, sent by an EventSource reconnecting'),
});

const tags = ['runs'];
const KEEPALIVE_MS = 15_000;

/** One SSE event: the data is JSON on one line, so no text of the agent's can end the event or start another. */
const sseEvent = (event: string, data: unknown, id?: number) => `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * A run's transcript (docs/runs.md#following-a-run-live): the gates push it, clients read it in pages or follow it as
 * server-sent events.
 */
export async function transcriptRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const feed = new TranscriptFeed(deps.store.reads);
  const push = {
    tags,
    summary: "A worker gate's push of new transcript entries of a run; entries already held are left as they are",
    body: TranscriptPushSchema,
    response: { 200: TranscriptPushAnswerSchema, ...errorResponses(401, 404, 422, 503) },
  };
  app.post('/control/api/worker-transcript', { config: { auth: 'callback' }, schema: push }, async (request) => {
    const answer = await storeTranscript(deps.store, request.body);
    feed.pushed(request.body.run_id);
    return answer;
  });

  const page = {
    tags,
    summary: "A page of the run's transcript: its agent's messages, tool calls and their output, token usage and lifecycle, in order",
    params: RunParams,
    querystring: TranscriptQuery,
    response: { 200: TranscriptPageSchema, ...errorResponses(401, 404, 422) },
  };
  app.get('/control/api/v1/runs/:run_id/transcript', { config: { auth: 'control' }, schema: page }, async (request) =>
    readTranscript(deps.store.reads, request.params.run_id, request.query.after, request.query.limit),
  );

  const stream = {
    tags,
    summary: "The run's transcript as server-sent events: `entry` events (id: the seq) after `after` or Last-Event-ID, `state` on each change of the run's state, `end` once the run is finished and its transcript sent",
    params: RunParams,
    querystring: StreamQuery,
    headers: StreamHeaders,
    response: {
      200: { description: 'An event stream (text/event-stream)', content: { 'text/event-stream': { schema: z.string() } } },
      ...errorResponses(401, 404, 422),
    },
  };
  app.get('/control/api/v1/runs/:run_id/transcript/stream', { config: { auth: 'control' }, schema: stream }, async (request, reply) => {
    const runId = request.params.run_id;
    const lastEventId = request.headers['last-event-id'];
    const after = lastEventId === undefined ? request.query.after : Number(lastEventId);
    // An unknown run is a 404 answered before the stream opens.
    await readTranscript(deps.store.reads, runId, after, 1);
    // HEAD (Fastify's copy of this route) answers the stream's headers and nothing more.
    if (request.method === 'HEAD') return reply.type('text/event-stream; charset=utf-8').send('');
    reply.hijack();
    const raw = reply.raw;
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) raw.setHeader(name, value);
    raw.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'x-accel-buffering': 'no' });
    raw.write('retry: 2000\n\n');
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      clearInterval(keepalive);
      unwatch();
      raw.end();
    };
    const sink: TranscriptSink = {
      entries: (entries) => raw.write(entries.map((entry) => sseEvent('entry', entry, entry.seq)).join('')),
      state: (state) => raw.write(sseEvent('state', { run_state: state })),
      end: () => {
        raw.write(sseEvent('end', { run_id: runId }));
        close();
      },
      fail: (error) => {
        request.log.warn({ run_id: runId, err: error }, 'transcript stream failed');
        raw.write(sseEvent('failed', { detail: 'the transcript could not be read; reconnect to go on' }));
        close();
      },
    };
    const unwatch = feed.watch(runId, after, sink);
    const keepalive = setInterval(() => raw.write(': keepalive\n\n'), KEEPALIVE_MS);
    request.raw.on('close', close);
  });
}
