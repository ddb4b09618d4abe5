import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { createInterface } from 'node:readline/promises';
import { Command, CommanderError, Option } from 'commander';
import { createControlClient, type ControlClient } from 'research-control-plane/client';
import { cancelText, causeText, cycleText } from './answers.ts';
import { completionScript } from './completion.ts';
import { colours, EXIT, explain, print, table, terminalSafe, UsageError, type Output } from './output.ts';
import { readProfile, writeProfile } from './profile.ts';
import { watchRun } from './watch.ts';
import { printRunLogs } from './run-logs.ts';
import { answerFields, questionText, type AnswerOptions } from './run-questions.ts';

/**
 * `rcp`, the command line of the control API (docs/http.md#rcp-the-command-line), on the typed client. Every command takes --json; a
 * command that changes something live shows its dry run first, and asks before the live call unless --yes.
 */

const { version: VERSION } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
const requestedBy = () => `rcp:${userInfo().username}`;

interface Io {
  output: Output;
  env: NodeJS.ProcessEnv;
  stdin: NodeJS.ReadStream;
}

function client(io: Io): ControlClient {
  const profile = readProfile(io.env);
  return createControlClient({ baseUrl: profile.url, token: profile.token });
}

async function confirm(io: Io, question: string, yes: boolean): Promise<void> {
  if (yes) return;
  if (!io.stdin.isTTY) throw new UsageError('refusing a live call without a terminal to confirm it: pass --yes');
  const prompt = createInterface({ input: io.stdin, output: io.output.err });
  const answer = await prompt.question(`${question} [y/N] `).finally(() => prompt.close());
  if (!/^y(es)?$/i.test(answer.trim())) throw new UsageError('not confirmed');
}

/** Up to `limit` rows of a cursor list (all with --all). */
async function rows<T>(iterator: AsyncGenerator<T>, limit: number | undefined): Promise<T[]> {
  const found: T[] = [];
  for await (const row of iterator) {
    found.push(row);
    if (limit !== undefined && found.length >= limit) break;
  }
  return found;
}

const limitOption = () => new Option('--limit <n>', 'at most this many rows').default(50).argParser(positiveInt);
function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`not a positive integer: ${value}`);
  return n;
}

export function buildProgram(io: Io, exit: { code: number }): Command {
  const program = new Command('rcp')
    .version(VERSION)
    .description('The research control plane from a terminal: queue, dispatch, runs, papers and research cycles')
    .option('--json', 'print JSON instead of tables')
    .showSuggestionAfterError()
    .exitOverride()
    .configureOutput({ writeOut: (text) => io.output.out.write(text), writeErr: (text) => io.output.err.write(text) });
  const out = (command: Command): Output => ({ ...io.output, json: Boolean(command.optsWithGlobals().json) });
  const c = colours(io.output.out);

  program
    .command('login')
    .description('save the control plane URL and token to your profile (the token is read from stdin, never the command line)')
    .requiredOption('--url <url>', 'the control plane, e.g. http://127.0.0.1:8080')
    .action(async (options: { url: string }, command: Command) => {
      const token = await readToken(io);
      const rcp = createControlClient({ baseUrl: options.url, token });
      // A read that needs the token: a wrong one is refused here, before it is saved.
      await rcp.data(rcp.api.GET('/control/api/status'));
      const path = writeProfile({ url: options.url, token }, io.env);
      print(out(command), { profile: path, url: options.url }, () => `logged in to ${options.url}; profile ${path}`);
    });

  program
    .command('status')
    .description('whether dispatch is safe, and the queue counts')
    .action(async (_options: unknown, command: Command) => {
      const rcp = client(io);
      const status = await rcp.data(rcp.api.GET('/control/api/status'));
      print(out(command), status, () => {
        const safe = status.dispatch_safe ? c.green('dispatch safe') : c.red(`dispatch blocked: ${status.dispatch_blockers.join(', ')}`);
        const counts = Object.entries(status.counts)
          .filter((entry): entry is [string, number] => typeof entry[1] === 'number' && entry[1] > 0)
          .map(([name, count]) => `${name} ${count}`)
          .join(', ');
        return `${safe}\nqueue: ${counts || 'empty'}\nlive dispatch ${status.live_dispatch_enabled ? 'on' : 'off'}`;
      });
    });

  program
    .command('queue')
    .description('queue items, in dispatch order')
    .addOption(new Option('--group <group>', 'a queue tab').choices(['active', 'queued', 'blocked', 'paused', 'completed', 'all']))
    .option('--status <status>', 'one status')
    .option('--search <text>', 'project id or name')
    .addOption(limitOption())
    .option('--all', 'every row, page after page')
    .action(async (options: { group?: string; status?: string; search?: string; limit: number; all?: boolean }, command: Command) => {
      const rcp = client(io);
      // openapi-fetch leaves out the parameters that are undefined: a filter not given is not sent.
      const query = { group: options.group, status: options.status, search: options.search, page_size: 100 };
      const items = await rows(rcp.each('/control/api/v1/queue', query as never), options.all ? undefined : options.limit);
      print(out(command), items, () => table(items, ['project_id', 'status', 'dispatch_priority', 'lane', 'current_run_id', 'next_action_hint']));
    });

  program
    .command('dispatch')
    .description('dispatch the next queue item, or the one --project names: always its dry run first; --live dispatches it')
    .option('--project <project_id>', 'the item to dispatch instead of the next in dispatch order')
    .option('--live', 'dispatch for real after the dry run')
    .option('--yes', 'do not ask before the live call')
    .action(async (options: { project?: string; live?: boolean; yes?: boolean }, command: Command) => {
      const rcp = client(io);
      const dry = await rcp.data(rcp.api.POST('/control/dispatch-next', { body: { dry_run: true, requested_by: requestedBy(), ...(options.project ? { project_id: options.project } : {}) } }));
      const o = out(command);
      if (!options.live || dry.action !== 'dry_run_dispatch') {
        const where = dry.placement ? ` (${dry.placement.reason})` : '';
        print(o, dry, () => `${dry.action}: ${dry.candidate ? `${dry.candidate.project_id} on ${dry.dispatch_route?.lane ?? 'default'}${where}` : dry.reason ?? 'nothing to dispatch'}`);
        if (options.live) exit.code = EXIT.failed;
        return;
      }
      if (!o.json) o.err.write(`dry run: ${dry.candidate?.project_id} on ${dry.dispatch_route?.machine_target ?? 'default'}\n`);
      await confirm(io, `dispatch ${dry.candidate?.project_id} live?`, Boolean(options.yes));
      // The live call dispatches the item the dry run showed, not whatever has come first meanwhile.
      const body = { dry_run: false, requested_by: requestedBy(), project_id: dry.candidate?.project_id, idempotency_key: rcp.idempotencyKey() };
      const live = await rcp.data(rcp.api.POST('/control/dispatch-next', { body }));
      print(o, live, () => `${live.action}: ${live.candidate?.project_id ?? ''} run ${live.run_id ?? '-'}${live.reason ? ` (${live.reason})` : ''}`);
      if (live.action !== 'live_dispatch') exit.code = EXIT.failed;
    });

  program
    .command('lanes')
    .description("each worker target's slots: which run holds each, on which GPUs, and what it would take next")
    .action(async (_options: unknown, command: Command) => {
      const rcp = client(io);
      const answer = await rcp.data(rcp.api.GET('/control/api/v1/lanes'));
      const gpus = (indices: number[] | null | undefined) => (indices === null || indices === undefined ? '-' : indices.length === 0 ? 'none' : indices.join(','));
      const rows = answer.lanes.map((lane) => ({
        lane: lane.lane,
        target: lane.route?.machine_target ?? '(not configured)',
        slot: lane.route ? `${lane.route.slot}` : '-',
        state: lane.idle ? 'idle' : 'busy',
        run: lane.active?.run?.run_id ?? null,
        run_state: lane.active?.run?.state ?? null,
        gpus: gpus(lane.active?.run?.gpu_indices),
        next: lane.next_candidate?.project_id ?? null,
      }));
      print(out(command), answer, () => table(rows, ['lane', 'target', 'slot', 'state', 'run', 'run_state', 'gpus', 'next']));
    });

  program
    .command('why')
    .description('why nothing moves: what holds each queued item the next dispatch would consider, each lane and each active run')
    .action(async (_options: unknown, command: Command) => {
      const rcp = client(io);
      const answer = await rcp.data(rcp.api.GET('/control/api/v1/why'));
      print(out(command), answer, () => {
        const safe = <T extends { reason: string }>(rows: T[]) => rows.map((row) => ({ ...row, reason: terminalSafe(row.reason) }));
        const parts = [terminalSafe(answer.summary)];
        if (answer.items.length > 0) parts.push('', table(safe(answer.items).map((item) => ({ item: item.project_id, lane: item.lane, why: item.kind, reason: item.reason })), ['item', 'lane', 'why', 'reason']));
        if (answer.lanes.length > 0) parts.push('', table(safe(answer.lanes).map((lane) => ({ lane: lane.lane, target: lane.machine_target, why: lane.kind, reason: lane.reason })), ['lane', 'target', 'why', 'reason']));
        if (answer.runs.length > 0) parts.push('', table(safe(answer.runs).map((run) => ({ run: run.run_id, state: run.state, why: run.kind, reason: run.reason })), ['run', 'state', 'why', 'reason']));
        return parts.join('\n');
      });
    });

  const runs = program
    .command('runs')
    .description('runs, newest first; rcp runs watch <run_id> follows one')
    .option('--state <state>', 'one state')
    .option('--project <project_id>', 'one project')
    .addOption(limitOption())
    .action(async (options: { state?: string; project?: string; limit: number }, command: Command) => {
      const rcp = client(io);
      const query = { state: options.state, project: options.project, page_size: 100 };
      const items = await rows(rcp.each('/control/api/v1/runs', query as never), options.limit);
      print(out(command), items, () => table(items.map((item) => ({ ...item, cause: causeText(item.cause) })), ['run_id', 'project_id', 'state', 'lane', 'decision', 'cause', 'created_at']));
    });
  runs
    .command('watch <run_id>')
    .description('follow a run until it finishes: exit 0 when it completed, 1 otherwise')
    .addOption(new Option('--interval <ms>', 'how often to look').default(1000).argParser(positiveInt))
    .action(async (runId: string, options: { interval: number }, command: Command) => {
      exit.code = await watchRun(client(io), runId, { output: out(command), intervalMs: options.interval });
    });

  runs
    .command('logs <run_id>')
    .description("the run's transcript: its agent's messages, tool calls and their output, token usage and lifecycle; --follow goes on live until the run finishes")
    .option('-f, --follow', 'go on printing new entries as the agent works, until the run finishes')
    .action(async (runId: string, options: { follow?: boolean }, command: Command) => {
      exit.code = await printRunLogs(client(io), readProfile(io.env), runId, { output: out(command), follow: options.follow === true });
    });
  runs
    .command('question <run_id>')
    .description("the question the run's agent waits on, with its choices (or the tool call it asks permission for)")
    .action(async (runId: string, _options: unknown, command: Command) => {
      const rcp = client(io);
      const detail = await rcp.data(rcp.api.GET('/control/api/v1/runs/{run_id}', { params: { path: { run_id: runId }, query: {} } }));
      const question = { run_id: runId, state: detail.run.state, question: detail.run.question, question_detail: detail.run.question_detail, permission_effect: detail.permission_effect };
      print(out(command), question, () => terminalSafe(questionText(detail)));
    });
  runs
    .command('files <run_id>')
    .description("the run's result files on its worker: run_notes.md, the decision file and results/, with sizes and SHA-256")
    .action(async (runId: string, _options: unknown, command: Command) => {
      const rcp = client(io);
      const listed = await rcp.data(rcp.api.GET('/control/api/v1/runs/{run_id}/files', { params: { path: { run_id: runId } } }));
      print(out(command), listed, () => {
        const rows = listed.files.map((file) => ({ path: terminalSafe(file.path), size: file.size, sha256: file.sha256 ?? '(too large to hash)', preview: file.preview }));
        const notes = [
          ...(listed.truncated ? ['(more files were left out: the list is bounded)'] : []),
          ...listed.refused.map((refused) => `not listed: ${terminalSafe(refused.path)}: ${terminalSafe(refused.reason)}`),
        ];
        return [rows.length > 0 ? table(rows, ['path', 'size', 'sha256', 'preview']) : 'no result files', ...notes].join('\n');
      });
    });
  runs
    .command('cat <run_id> <path>')
    .description('one result file of the run: text as text (control characters escaped), an image\'s bytes when stdout is not a terminal')
    .action(async (runId: string, path: string, _options: unknown, command: Command) => {
      const rcp = client(io);
      const file = await rcp.data(rcp.api.GET('/control/api/v1/runs/{run_id}/files/content', { params: { path: { run_id: runId }, query: { path } } }));
      const o = out(command);
      if (o.json) return print(o, file, () => '');
      if (file.content === null) {
        o.err.write(`${terminalSafe(file.path)}: ${file.size} bytes of ${file.media_type}${file.truncated ? ', too large to preview' : ', no preview for this type'}\n`);
        exit.code = EXIT.failed;
        return;
      }
      if (file.encoding === 'base64') {
        if (o.out.isTTY) {
          o.err.write(`${terminalSafe(file.path)} is a ${file.media_type} image of ${file.size} bytes: redirect stdout to a file to save it\n`);
          exit.code = EXIT.failed;
        } else o.out.write(Buffer.from(file.content, 'base64'));
        return;
      }
      o.out.write(terminalSafe(file.content));
      if (!file.content.endsWith('\n')) o.out.write('\n');
      if (file.truncated) o.err.write(`(a preview: the file has ${file.size} bytes, and only its beginning is shown)\n`);
    });
  runs
    .command('answer <run_id>')
    .description("answer the agent's question or permission request: its session resumes with the answer")
    .option('--text <answer>', 'the answer in words')
    .option('--choice <label>', "one of the question's options")
    .option('--allow-once', 'allow the call the agent asked permission for, this once')
    .option('--allow-for-run', 'allow the tool for the rest of the run')
    .option('--deny', 'deny the call')
    .option('--note <text>', 'words for the agent with --choice or a permission decision')
    .action(async (runId: string, options: AnswerOptions, command: Command) => {
      const fields = answerFields(options);
      if (typeof fields === 'string') throw new UsageError(fields);
      const rcp = client(io);
      const body = { ...fields, requested_by: requestedBy(), idempotency_key: rcp.idempotencyKey() };
      const answer = await rcp.data(rcp.api.POST('/control/api/v1/runs/{run_id}/answer', { params: { path: { run_id: runId } }, body }));
      print(out(command), answer, () => `${answer.run_id}: answer ${answer.answer_number} sent; the agent's session resumes with it${answer.allowed_tools.length > 0 ? ` (allowed: ${answer.allowed_tools.map((tool) => `${tool.rule} ${tool.scope}`).join(', ')})` : ''}`);
    });

  runs
    .command('resume <run_id>')
    .description("resume a run that waits out the model's usage limit now, before its reset: its agent's session resumes")
    .option('--note <text>', 'why, for the audit trail')
    .action(async (runId: string, options: { note?: string }, command: Command) => {
      const rcp = client(io);
      const body = { requested_by: requestedBy(), idempotency_key: rcp.idempotencyKey(), ...(options.note ? { note: options.note } : {}) };
      const answer = await rcp.data(rcp.api.POST('/control/api/v1/runs/{run_id}/resume', { params: { path: { run_id: runId } }, body }));
      print(out(command), answer, () => `${answer.run_id}: resuming now (usage limit ${answer.limit_number}; it would have resumed at ${answer.resumes_at})`);
    });

  program
    .command('cancel <run_id>')
    .description('cancel a run')
    .option('--reason <text>', 'why, for the audit trail', 'canceled from rcp')
    .action(async (runId: string, options: { reason: string }, command: Command) => {
      const rcp = client(io);
      const answer = await rcp.data(rcp.api.POST('/control/api/runs/{run_id}/cancel', { params: { path: { run_id: runId } }, body: { requested_by: requestedBy(), reason: options.reason } }));
      print(out(command), answer, () => cancelText(answer));
    });

  program
    .command('events')
    .description('the audit trail, newest first; --follow prints new events as they come')
    .option('--entity-id <id>', 'events of one run, project, paper or candidate')
    .option('--event-type <type>', 'one event type')
    .addOption(limitOption().default(20))
    .option('--follow', 'keep printing new events')
    .addOption(new Option('--interval <ms>', 'how often --follow looks').default(1000).argParser(positiveInt))
    .action(async (options: { entityId?: string; eventType?: string; limit: number; follow?: boolean; interval: number }, command: Command) => {
      const rcp = client(io);
      const o = out(command);
      const query = { entity_id: options.entityId, event_type: options.eventType };
      const show = (events: { id: number; created_at: string; event_type: string; entity_type: string; entity_id: string }[]) => {
        for (const event of events) o.out.write(o.json ? `${JSON.stringify(event)}\n` : `${event.created_at}  ${event.event_type}  ${event.entity_type} ${event.entity_id}\n`);
      };
      const newest = await rcp.data(rcp.api.GET('/control/api/v1/events', { params: { query: { ...query, page_size: options.limit } } }));
      show([...newest.items].reverse());
      let last = newest.items[0]?.id ?? 0;
      while (options.follow) {
        await new Promise((resolve) => setTimeout(resolve, options.interval));
        const page = await rcp.data(rcp.api.GET('/control/api/v1/events', { params: { query: { ...query, page_size: 100 } } }));
        const fresh = page.items.filter((event) => event.id > last).reverse();
        show(fresh);
        last = Math.max(last, ...fresh.map((event) => event.id));
      }
    });

  const research = program.command('research').description('the Research Facility: candidates in, promoted to the queue');
  research
    .command('import <file>')
    .description('import candidates from a JSON file (an array, or {"candidates": [...]}): a dry run unless --live')
    .option('--live', 'record them')
    .action(async (file: string, options: { live?: boolean }, command: Command) => {
      const parsed = JSON.parse(readFileSync(file, 'utf8')) as unknown;
      const candidates = Array.isArray(parsed) ? parsed : (parsed as { candidates?: unknown }).candidates;
      if (!Array.isArray(candidates)) throw new UsageError(`${file} holds no array of candidates`);
      const rcp = client(io);
      const body = { candidates, dry_run: !options.live, requested_by: requestedBy(), ...(options.live ? { idempotency_key: rcp.idempotencyKey() } : {}) };
      const answer = await rcp.data(rcp.api.POST('/control/api/research/import-candidates', { body: body as never }));
      print(out(command), answer, () => table(answer.results as Record<string, unknown>[], ['candidate_id', 'decision', 'score', 'title']));
    });
  research
    .command('promote <candidate_id>')
    .description('promote an admitted candidate to the queue: a dry run unless --live')
    .option('--live', 'promote it')
    .action(async (candidateId: string, options: { live?: boolean }, command: Command) => {
      const rcp = client(io);
      const body = options.live
        ? { candidate_id: candidateId, dry_run: false, requested_by: requestedBy(), idempotency_key: `rcp-promote-${candidateId}` }
        : { candidate_id: candidateId, dry_run: true, requested_by: requestedBy() };
      const answer = await rcp.data(rcp.api.POST('/control/api/research/promote-candidate', { body }));
      print(out(command), answer, () => `${answer.action}: ${candidateId}${'project_id' in answer && answer.project_id ? ` as ${answer.project_id}` : ''}`);
    });

  const papers = program
    .command('papers')
    .description('papers, highest rank first; rcp papers draft-next drafts the next one')
    .option('--status <paper_status>', 'one paper status')
    .addOption(limitOption())
    .action(async (options: { status?: string; limit: number }, command: Command) => {
      const rcp = client(io);
      const items = await rows(rcp.each('/control/api/v1/papers', { status: options.status, page_size: 100 } as never), options.limit);
      // The stage, not paper_status, which stays where the last draft left it once a paper is finalized or imported;
      // the actions are the commands the server says the paper takes now.
      const shown = items.map((paper) => ({ ...paper, actions: paper.operator_actions.join(' ') || null }));
      print(out(command), items, () => table(shown, ['paper_id', 'stage', 'review_status', 'rank_score', 'actions', 'title']));
    });
  papers
    .command('approve <paper_id>')
    .description("pass the paper's final human approval (its checklist item final_human_approval)")
    .option('--note <text>', 'a note for the audit trail')
    .action(async (paperId: string, options: { note?: string }, command: Command) => {
      const rcp = client(io);
      const answer = await rcp.data(
        rcp.api.POST('/control/api/publication-automation/{paper_id}/checklist/{item_id}', {
          params: { path: { paper_id: paperId, item_id: 'final_human_approval' } },
          body: { status: 'pass', requested_by: requestedBy(), idempotency_key: rcp.idempotencyKey(), ...(options.note ? { note: options.note } : {}) },
        }),
      );
      print(out(command), answer, () => `approved ${paperId}`);
    });
  papers
    .command('package <paper_id>')
    .description('write the finalization package of an approved paper')
    .requiredOption('--target-label <label>', 'the corpus release it is for')
    .action(async (paperId: string, options: { targetLabel: string }, command: Command) => {
      const rcp = client(io);
      const answer = await rcp.data(
        rcp.api.POST('/control/api/publication-automation/{paper_id}/prepare-finalization-package', {
          params: { path: { paper_id: paperId } },
          body: { target_label: options.targetLabel, requested_by: requestedBy(), idempotency_key: rcp.idempotencyKey() },
        }),
      );
      print(out(command), answer, () => `packaged ${paperId}: ${'package_dir' in answer ? answer.package_dir : ''} manifest ${'manifest_sha256' in answer ? answer.manifest_sha256 : ''}`);
    });
  papers
    .command('record-import <paper_id>')
    .description("record that the corpus imported the paper's package")
    .requiredOption('--corpus-repo <repo>', 'the corpus repository')
    .requiredOption('--commit-sha <sha>', 'the commit that imported it')
    .requiredOption('--manifest-sha256 <sha256>', "the package manifest's sha256, as rcp papers package printed it")
    .action(async (paperId: string, options: { corpusRepo: string; commitSha: string; manifestSha256: string }, command: Command) => {
      const rcp = client(io);
      const answer = await rcp.data(
        rcp.api.POST('/control/api/publication-automation/{paper_id}/record-import', {
          params: { path: { paper_id: paperId } },
          body: { corpus_repo: options.corpusRepo, commit_sha: options.commitSha, manifest_sha256: options.manifestSha256, requested_by: requestedBy(), idempotency_key: rcp.idempotencyKey() },
        }),
      );
      print(out(command), answer, () => `recorded the import of ${paperId} in ${options.corpusRepo}@${options.commitSha}`);
    });
  papers
    .command('draft-next')
    .description('draft a paper from the best completed run without one: a dry run unless --live')
    .option('--live', 'draft it')
    .action(async (options: { live?: boolean }, command: Command) => {
      const rcp = client(io);
      const answer = await rcp.data(rcp.api.POST('/control/papers/draft-next', { body: { dry_run: !options.live, requested_by: requestedBy() } }));
      print(out(command), answer, () => `${answer.action}${'paper_id' in answer && answer.paper_id ? `: ${answer.paper_id}` : ''}`);
    });

  program
    .command('cycle')
    .description('a bounded research cycle with the server defaults: always its dry run first; --live runs it')
    .option('--live', 'run it after the dry run')
    .option('--yes', 'do not ask before the live call')
    .action(async (options: { live?: boolean; yes?: boolean }, command: Command) => {
      const rcp = client(io);
      const o = out(command);
      const dry = await rcp.data(rcp.api.POST('/control/api/research/run-cycle', { body: { dry_run: true, requested_by: requestedBy() } }));
      if (!options.live) {
        print(o, dry, () => cycleText(dry));
        return;
      }
      if (!o.json) o.err.write(`dry run:\n${cycleText(dry)}\n`);
      await confirm(io, 'run this cycle live?', Boolean(options.yes));
      const live = await rcp.data(rcp.api.POST('/control/api/research/run-cycle', { body: { dry_run: false, enabled: true, requested_by: requestedBy(), idempotency_key: rcp.idempotencyKey() } }));
      print(o, live, () => cycleText(live));
    });

  program
    .command('pause')
    .description('pause dispatch')
    .requiredOption('--reason <text>', 'why, for the audit trail and the dashboard')
    .option('--maintenance', 'maintenance mode')
    .action(async (options: { reason: string; maintenance?: boolean }, command: Command) => {
      const rcp = client(io);
      const answer = await rcp.data(rcp.api.POST('/control/pause', { body: { reason: options.reason, paused_by: requestedBy(), maintenance_mode: Boolean(options.maintenance) } }));
      print(out(command), answer, () => `paused: ${options.reason}`);
    });
  program
    .command('resume')
    .description('resume dispatch')
    .action(async (_options: unknown, command: Command) => {
      const rcp = client(io);
      const answer = await rcp.data(rcp.api.POST('/control/resume', { body: { resumed_by: requestedBy() } }));
      print(out(command), answer, () => 'resumed');
    });

  program
    .command('completion')
    .description('print the shell completion script: eval "$(rcp completion bash)", or zsh')
    .addArgument(new Command().createArgument('<shell>', 'bash or zsh').choices(['bash', 'zsh']))
    .action((shell: 'bash' | 'zsh') => {
      io.output.out.write(completionScript(program, shell));
    });

  return program;
}

async function readToken(io: Io): Promise<string> {
  if (io.stdin.isTTY) {
    io.output.err.write('control API token (not echoed): ');
    io.stdin.setRawMode(true);
    let token = '';
    try {
      // Key by key: a pasted token arrives as one chunk, often with its Enter.
      reading: for await (const chunk of io.stdin) {
        for (const key of String(chunk)) {
          if (key === '\u0003') throw new UsageError('interrupted');
          if (key === '\r' || key === '\n') break reading;
          token = key === '\u007f' || key === '\b' ? token.slice(0, -1) : token + key;
        }
      }
    } finally {
      io.stdin.setRawMode(false);
      io.output.err.write('\n');
    }
    return token.trim();
  }
  let text = '';
  for await (const chunk of io.stdin) text += String(chunk);
  const token = text.trim();
  if (!token) throw new UsageError('no token on stdin: echo "$TOKEN" | rcp login --url …');
  return token;
}

/** Runs `rcp` with these arguments; answers the exit code. */
export async function main(argv: string[], io: Io): Promise<number> {
  const exit = { code: EXIT.ok as number };
  const program = buildProgram(io, exit);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return exit.code;
  } catch (error) {
    // Commander has printed its own line already.
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    const { line, code } = explain(error);
    io.output.err.write(`${line}\n`);
    return code;
  }
}
