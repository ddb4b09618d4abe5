import { randomUUID } from 'node:crypto';
import { readProviderQuota, requestCandidates, type ProviderCall, type ProviderSettings } from './research-provider.ts';
import { judgeBudget, type BudgetLimits, type QuotaReading } from './domain/provider-budget.ts';
import { CandidateProposalSchema, type CandidateProposal } from './domain/research-candidate.ts';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { claimKey, completeKey, releaseKey } from '../../platform/store/idempotency-keys.ts';
import { providerRequestsLastDay, recordProviderRequest } from './store/provider-requests.ts';
import { listCandidates } from './research-candidates.ts';
import { getSourcesByIds, listSources } from './store/research-sources.ts';
import type { Store } from '../../platform/store/store.ts';
import type { Config } from '../../platform/config/schema.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import { firstUnstorable, storableText } from '../../platform/http/validation.ts';
import type { BatchResult, ResearchFacility } from './research-facility.ts';

/**
 * Provider-backed generation (docs/research.md#provider-backed-generation), fail-closed: the provider's quota is read before
 * any request, and a quota that cannot be read, too little credit or too few requests left in the window refuse the
 * call with the reason. A live call sends one chat/completions request, records it in provider_requests whatever its
 * outcome, validates each proposed candidate, and writes the valid ones to the Research Facility ledgers only (their
 * queue_admitted stays false until an operator or a cycle promotes one).
 */

export interface ProviderBatchSettings {
  /** Null when the provider is not configured; `missing` names the fields to set. */
  provider: ProviderSettings | null;
  missing: readonly string[];
  limits: BudgetLimits;
}

export interface ProviderBatchDeps {
  store: Store;
  facility: ResearchFacility;
  settings: ProviderBatchSettings;
}

export interface ProviderBatchRequest {
  dry_run: boolean;
  requested_by: string;
  count: number;
  idempotency_key?: string | undefined;
}

/** One live call spends this many provider requests. */
export const REQUESTS_PER_BATCH = 1;
const PROMPT_SOURCES = 20;
const PROMPT_TAKEN_KEYS = 50;
const SCOPE = 'research.generate-provider-batch';

export interface ProviderBudget {
  ok: boolean;
  reason: string;
  remaining_credits: number | null;
  window: { limit: number; remaining: number; resets_at: string } | null;
  requests_last_24h: number;
  checked_at: string;
}

async function quotaOf(settings: ProviderBatchSettings): Promise<QuotaReading> {
  if (!settings.provider) return { ok: false, error: `the research provider is not configured (set ${settings.missing.join(', ')})` };
  return readProviderQuota(settings.provider);
}

/** `GET /control/api/research/provider-budget`, and the check every live call makes first. */
export async function providerBudget(deps: Pick<ProviderBatchDeps, 'store' | 'settings'>, requestsToSpend = REQUESTS_PER_BATCH): Promise<ProviderBudget> {
  const [reading, requestsLastDay] = await Promise.all([quotaOf(deps.settings), providerRequestsLastDay(deps.store)]);
  const verdict = judgeBudget(reading, deps.settings.limits, requestsToSpend);
  return {
    ...verdict,
    remaining_credits: reading.ok ? reading.quota.remaining_credits : null,
    window: reading.ok ? reading.quota.window : null,
    requests_last_24h: requestsLastDay,
    checked_at: new Date().toISOString(),
  };
}

export interface InvalidCandidate {
  index: number;
  problems: string[];
}

/**
 * The proposals a provider answer holds, each validated as an imported candidate would be, plus rules of its own: at
 * most `count` are read, a provider candidate names a generation mode other than manual_import, and cites only stored
 * sources.
 */
async function validProposals(store: Store, raw: readonly unknown[], count: number): Promise<{ proposals: CandidateProposal[]; invalid: InvalidCandidate[] }> {
  const parsed: { index: number; proposal: CandidateProposal }[] = [];
  const invalid: InvalidCandidate[] = [];
  raw.forEach((entry, index) => {
    if (index >= count) return invalid.push({ index, problems: [`beyond the requested count (${count})`] });
    if (firstUnstorable(entry) !== null) return invalid.push({ index, problems: ['holds text that cannot be stored (a NUL character or an unpaired surrogate)'] });
    const result = CandidateProposalSchema.safeParse(entry);
    if (!result.success) {
      return invalid.push({ index, problems: result.error.issues.slice(0, 5).map((issue) => `${issue.path.join('.') || '(candidate)'}: ${issue.message}`) });
    }
    const mode = (entry as { generation_mode?: unknown }).generation_mode;
    if (mode === undefined || mode === 'manual_import') {
      return invalid.push({ index, problems: ['generation_mode: a provider candidate names its mode (manual_import is for operators)'] });
    }
    // Lineage to a parent run is the follow-up launcher's to write, from the ledgers, not a model's to claim.
    if (mode === 'followup_from_negative' || result.data.parent_run_id || result.data.parent_project_id) {
      return invalid.push({ index, problems: ['a provider candidate names no parent run or project (follow-ups come from launch-next)'] });
    }
    return parsed.push({ index, proposal: result.data });
  });
  const cited = [...new Set(parsed.flatMap(({ proposal }) => proposal.source_ids))];
  const stored = new Set((await getSourcesByIds(store, cited)).map((source) => source.source_id));
  const proposals: CandidateProposal[] = [];
  for (const { index, proposal } of parsed) {
    const unknown = proposal.source_ids.filter((id) => !stored.has(id));
    if (unknown.length === 0) proposals.push(proposal);
    else invalid.push({ index, problems: unknown.map((id) => `source_ids: unknown source '${id}'`) });
  }
  return { proposals, invalid: invalid.sort((a, b) => a.index - b.index) };
}

const providerView = (call: ProviderCall, requestId: number) => ({
  request_id: requestId,
  outcome: call.outcome,
  http_status: call.http_status,
  duration_ms: call.duration_ms,
  prompt_tokens: call.prompt_tokens,
  completion_tokens: call.completion_tokens,
  total_tokens: call.total_tokens,
  cost: call.cost,
  detail: call.detail,
});

export interface ProviderBatchAnswer {
  ok: boolean;
  action: 'dry_run_provider_generation' | 'provider_generation' | 'provider_generation_blocked';
  dry_run: boolean;
  reason: string;
  budget: ProviderBudget;
  count?: number;
  batch_id?: string;
  provider?: ReturnType<typeof providerView>;
  counts?: BatchResult['counts'];
  results?: BatchResult['results'];
  invalid?: InvalidCandidate[];
  written?: BatchResult['written'];
}

export async function generateProviderBatch(deps: ProviderBatchDeps, request: ProviderBatchRequest): Promise<ProviderBatchAnswer> {
  const { store, settings } = deps;
  if (request.dry_run) {
    const budget = await providerBudget(deps);
    return {
      ok: budget.ok,
      action: 'dry_run_provider_generation',
      dry_run: true,
      reason: budget.ok ? `would ask ${settings.provider!.model} for at most ${request.count} candidate(s) in one request` : budget.reason,
      budget,
      count: request.count,
    };
  }
  if (store.readOnly) throw new CommandRefusedError(501, 'the store is read-only (control_plane_store_backend is pg_readonly)');
  const key = request.idempotency_key;
  if (!key) throw new CommandRefusedError(422, [{ loc: ['body', 'idempotency_key'], msg: 'is required for a live provider batch', type: 'missing' }]);
  const payload = { requested_by: request.requested_by, count: request.count };
  const claim = await claimKey<never, ProviderBatchAnswer>(store, { scope: SCOPE, key, payload });
  if (claim.state === 'done') return claim.response;
  if (claim.state === 'pending') throw new CommandRefusedError(409, `a provider batch with idempotency key '${key}' is still running`);

  let completed = false;
  try {
    const budget = await providerBudget(deps);
    if (!budget.ok) {
      return { ok: false, action: 'provider_generation_blocked', dry_run: false, reason: budget.reason, budget };
    }
    const provider = settings.provider!;
    const batchId = `provider-${randomUUID().replaceAll('-', '').slice(0, 16)}`;
    const [sources, recent] = await Promise.all([listSources(store, PROMPT_SOURCES), listCandidates(store, { page: 1, page_size: PROMPT_TAKEN_KEYS })]);
    const call = await requestCandidates(provider, {
      count: request.count,
      sources: sources.map(({ source_id, kind, title, summary }) => ({ source_id, kind, title, summary })),
      taken_dedupe_keys: recent.items.map((candidate) => candidate.dedupe_key),
    });
    const requestId = await recordProviderRequest(store, { purpose: 'generate_provider_batch', batch_id: batchId, model: provider.model, requested_by: request.requested_by, call: { ...call, detail: storableText(call.detail) } });
    if (call.outcome !== 'ok' || !call.candidates) {
      throw new CommandRefusedError(call.outcome === 'timeout' ? 504 : 502, { message: `the research provider request failed (${call.outcome}): ${call.detail}`, ...providerView(call, requestId) });
    }
    const { proposals, invalid } = await validProposals(store, call.candidates, request.count);
    const answer = await store.transaction(async (tx) => {
      const recorded: BatchResult | null = proposals.length > 0 ? await deps.facility.planAndRecord(tx, { batchId, proposals, sources: [], actor: request.requested_by }) : null;
      await appendAuditEvent(tx, {
        entity_type: 'research_batch',
        entity_id: batchId,
        event_type: 'research.provider_batch_generated',
        payload: { request_id: requestId, proposed: call.candidates!.length, stored: recorded?.written.candidates ?? 0, invalid: invalid.length },
        idempotency_key: key,
        actor: request.requested_by,
      });
      const result: ProviderBatchAnswer = {
        ok: true,
        action: 'provider_generation',
        dry_run: false,
        reason: `${proposals.length} of ${call.candidates!.length} proposed candidate(s) were valid and planned`,
        batch_id: batchId,
        budget,
        provider: providerView(call, requestId),
        counts: recorded?.counts ?? { admitted: 0, rejected: 0, merged: 0, 'needs-review': 0 },
        results: recorded?.results ?? [],
        invalid,
        written: recorded?.written ?? { sources: 0, candidates: 0, admissions: 0, lineage: 0 },
      };
      await completeKey(tx, SCOPE, key, { response: result, status_code: 200 });
      return result;
    });
    completed = true;
    return answer;
  } finally {
    // A refused or failed call wrote no candidates: the same key may be sent again once it would succeed.
    if (!completed) await releaseKey(store, SCOPE, key);
  }
}

/** The provider's settings from config; the key comes from RESEARCH_PROVIDER_API_KEY only. */
export function providerBatchSettingsFrom(config: Config): ProviderBatchSettings {
  const required = { research_provider_base_url: config.research_provider_base_url, research_provider_model: config.research_provider_model, research_provider_quota_url: config.research_provider_quota_url };
  const missing = Object.entries(required).filter(([, value]) => !value).map(([name]) => name);
  const limits = { minRemainingCredits: config.research_provider_min_remaining_credits, requestReserve: config.research_provider_request_reserve };
  if (missing.length > 0) return { provider: null, missing, limits };
  return {
    provider: {
      base_url: required.research_provider_base_url!,
      model: required.research_provider_model!,
      quota_url: required.research_provider_quota_url!,
      api_key: config.research_provider_api_key ?? '',
      timeout_ms: config.research_provider_timeout_sec * 1000,
    },
    missing: [],
    limits,
  };
}
