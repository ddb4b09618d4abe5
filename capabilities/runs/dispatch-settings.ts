import type { Config } from '../../platform/config/schema.ts';
import { workerRoutingFrom, type WorkerRouting } from './domain/worker-lanes.ts';
import type { ReasoningEffort } from '../../worker-gate/contract/gate-names.ts';
import type { OperationalTrace } from '../../platform/observability/operational-trace.ts';

/** What dispatch, preflight, status and the worker callback need from config. */
export interface DispatchSettings {
  liveDispatchEnabled: boolean;
  routing: WorkerRouting;
  /** completion_callback_token: gate callbacks carry it; preflight compares the gate's fingerprint of it. */
  completionCallbackToken: string;
  dispatchTimeoutSec: number;
  /** max_wait_after_idle_sec: how long a run may wait for its completion callbacks (plus a margin). */
  maxWaitAfterIdleSec: number;
  /** agent_question_wait_sec: how long a run waits for the answer to its agent's question. */
  questionWaitSec?: number;
  /** What a live dispatch starts the agent with unless the call overrides it (agent_model, agent_reasoning_effort, agent_sandbox). */
  agent: AgentDefaults;
  /** The operational trace, when enabled: calls to worker gates are recorded in it. */
  trace?: OperationalTrace;
  /** agent_token_budget_multiple: a run's token budget is its candidate's expected_token_budget times this; 0 or absent: none. */
  tokenBudgetMultiple?: number;
}

export interface AgentDefaults {
  model: string;
  reasoning_effort: ReasoningEffort;
  sandbox: string;
}

/** The agent's settings when config names none. */
export const AGENT_DEFAULTS: AgentDefaults = { model: '', reasoning_effort: 'medium', sandbox: '' };

export function dispatchSettingsFrom(config: Config, trace?: OperationalTrace): DispatchSettings {
  return {
    agent: { model: config.agent_model, reasoning_effort: config.agent_reasoning_effort, sandbox: config.agent_sandbox },
    ...(trace ? { trace } : {}),
    liveDispatchEnabled: config.live_dispatch_enabled,
    routing: workerRoutingFrom(config),
    completionCallbackToken: config.completion_callback_token,
    dispatchTimeoutSec: config.dispatch_timeout_sec,
    maxWaitAfterIdleSec: config.max_wait_after_idle_sec,
    questionWaitSec: config.agent_question_wait_sec,
    tokenBudgetMultiple: config.agent_token_budget_multiple,
  };
}

/** Settings of an install without worker targets: nothing can be dispatched, preflighted or refreshed. */
export const NO_ROUTING: WorkerRouting = { targets: new Map(), lanes: new Map(), workloadTargets: {}, defaultTarget: null, classNeeds: {} };
