import { createActivities } from '../../activities/index.ts';
import { OPERATION_IDS } from '../../api/operation-ids.ts';
import { activitiesByQueue } from '../../bin/temporal-runtime.ts';
import { scheduleSettings } from '../../capabilities/automation/schedules.ts';
import { ConfigFieldsSchema } from '../../platform/config/schema.ts';
import { CYCLE_POLICY_DEFAULTS } from '../../capabilities/automation/domain/cycle-policy.ts';
import * as cycleMessages from '../../workflows/automation/cycle-messages.ts';
import * as workflows from '../../workflows/index.ts';
import * as runMessages from '../../workflows/runs/run-messages.ts';
import * as paperMessages from '../../workflows/papers/paper-messages.ts';
import * as patches from '../../workflows/patches.ts';
import * as scheduleMessages from '../../workflows/automation/schedule-messages.ts';
import { cycleStartOptions, draftNextStartOptions, paperStartOptions, rewriteBatchStartOptions, runStartOptions } from '../../workflows/start-options.ts';
import { FIXTURE_PATCHES } from '../fixtures/history-patches.ts';

/**
 * Every name Temporal keeps in its histories, schedules and visibility store, or that a client calls the control plane
 * by, read from the modules that define them: a workflow started before a change must still find its type, messages,
 * activities and patches on the code after it.
 */

const MESSAGE_MODULES = { cycleMessages, runMessages, paperMessages, scheduleMessages };
const TASK_QUEUE = ConfigFieldsSchema.shape.temporal_task_queue.parse(undefined);

const sorted = <T>(values: Iterable<T>): T[] => [...values].sort();
const sortedEntries = <T>(record: Record<string, T>): Record<string, T> => Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));

/** The signal, update and query definitions every messages module exports, by kind. */
function messageNames(): Record<'signal' | 'update' | 'query', string[]> {
  const names = { signal: [] as string[], update: [] as string[], query: [] as string[] };
  for (const module of Object.values(MESSAGE_MODULES)) {
    for (const value of Object.values<unknown>(module)) {
      const definition = value as { type?: unknown; name?: unknown } | null;
      if (typeof definition !== 'object' || definition === null || typeof definition.name !== 'string') continue;
      if (definition.type === 'signal' || definition.type === 'update' || definition.type === 'query') names[definition.type].push(definition.name);
    }
  }
  return { signal: sorted(names.signal), update: sorted(names.update), query: sorted(names.query) };
}

/** The constants naming a workflow type that clients and parents start by name. */
function workflowTypeConstants(): Record<string, string> {
  const constants: Record<string, string> = {};
  for (const module of Object.values(MESSAGE_MODULES)) {
    for (const [name, value] of Object.entries<unknown>(module)) if (name.endsWith('_WORKFLOW_TYPE') && typeof value === 'string') constants[name] = value;
  }
  return sortedEntries(constants);
}

function activityNamesByQueue(): Record<string, string[]> {
  // Building the activities reads nothing from their dependencies; only their names are wanted here.
  const activities = createActivities({ store: {} as never, settings: {} as never, papers: { secrets: {} } as never, automation: {} as never });
  const queues = activitiesByQueue(activities);
  return { [TASK_QUEUE]: sorted(Object.keys(queues.main)), [paperMessages.paperActivityQueue(TASK_QUEUE)]: sorted(Object.keys(queues.papers)) };
}

function patchIds(): Record<string, unknown> {
  return sortedEntries(Object.fromEntries(Object.entries<unknown>(patches).map(([name, value]) => [name, typeof value === 'object' && value !== null ? sortedEntries(value as Record<string, string>) : value])));
}

function workflowIds(): Record<string, string> {
  const run = runStartOptions({
    run_id: 'run-1',
    project_id: 'project-1',
    lane: 'lane-1',
    requested_by: 'tester',
    agent: { mode: 'simulated' as never, model: '', reasoning_effort: 'medium' as never, sandbox: '' },
    timings: { completion_wait_sec: 1, gate_call_timeout_sec: 1, gate_call_attempts: 1, gate_retry_initial_sec: 1 },
  });
  const paper = paperStartOptions({ paper_id: 'paper-1', project_id: 'project-1', run_id: 'run-1', purpose: 'draft' as never, requested_by: 'tester', request_key: null });
  const cycle = cycleStartOptions({ cycle_id: 'cycle-1', requested_by: 'tester', policy: CYCLE_POLICY_DEFAULTS });
  const rewriteBatch = rewriteBatchStartOptions({ papers: [], requested_by: 'tester', request_key: 'key-1' });
  const draftNext = (owner: string) => draftNextStartOptions({ requested_by: 'tester', force: false, request_key: null }, paperMessages.draftNextWorkflowId(owner)).workflowId;
  const schedules = scheduleSettings({ taskQueue: TASK_QUEUE, pump: { enabled: true, intervalSec: 10 }, alerts: { enabled: true, intervalSec: 10 } });
  return {
    run: run.workflowId,
    paper: paper.workflowId,
    researchCycle: cycle.workflowId,
    rewriteBatch: rewriteBatch.workflowId,
    draftNextOfQueuePump: draftNext(paperMessages.draftNextOwner.queuePump(TASK_QUEUE)),
    draftNextOfResearchCycle: draftNext(paperMessages.draftNextOwner.researchCycle('cycle-1')),
    draftNextOfRequest: draftNext(paperMessages.draftNextOwner.request('request-1')),
    // Temporal appends each tick's start time to its schedule's workflow id.
    ...Object.fromEntries(schedules.map((schedule) => [`${schedule.name} tick`, `${schedule.scheduleId}-<time>`])),
  };
}

export function temporalNames() {
  const schedules = scheduleSettings({ taskQueue: TASK_QUEUE, pump: { enabled: true, intervalSec: 10 }, alerts: { enabled: true, intervalSec: 10 } });
  return {
    workflowTypes: sorted(Object.entries<unknown>(workflows).flatMap(([name, value]) => (typeof value === 'function' ? [name] : []))),
    workflowTypeConstants: workflowTypeConstants(),
    messages: messageNames(),
    activitiesByTaskQueue: activityNamesByQueue(),
    patches: patchIds(),
    fixturePatches: sortedEntries(FIXTURE_PATCHES),
    taskQueues: { default: TASK_QUEUE, paperFileSteps: paperMessages.paperActivityQueue(TASK_QUEUE) },
    schedules: schedules.map((schedule) => ({ name: schedule.name, scheduleId: schedule.scheduleId, workflowType: schedule.workflowType, taskQueue: schedule.taskQueue })),
    searchAttributes: runMessages.SEARCH_ATTRIBUTES.map((attribute) => ({ name: attribute.name, type: attribute.type })),
    workflowIds: workflowIds(),
    operationIds: sortedEntries(OPERATION_IDS),
  };
}
