import type { WorkloadClass } from '../worker-gate/contract/workload.ts';
import type { AgentIsolation } from '../worker-gate/contract/agent-isolation.ts';
import type { RunCgroupsStatus } from '../worker-gate/contract/gate-endpoints.ts';
import type { CoreSettings } from '../capabilities/core/core-ingest.ts';
import type { CycleLauncher } from '../capabilities/automation/cycle-launcher.ts';
import type { PumpDeps } from '../capabilities/automation/queue-pump.ts';
import type { AlertSettings } from '../capabilities/automation/queue-alerts.ts';
import type { DispatchSettings } from '../capabilities/runs/dispatch-settings.ts';
import type { PaperLauncher } from '../capabilities/papers/paper-launcher.ts';
import type { PaperSettings } from '../capabilities/papers/paper-settings.ts';
import type { ProviderBatchSettings } from '../capabilities/research/provider-batch.ts';
import type { ClusterConfigView } from '../platform/cluster/replicas.ts';
import type { RunLauncher } from '../capabilities/runs/run-launcher.ts';
import type { ResearchFacility } from '../capabilities/research/research-facility.ts';
import type { QueueOperator } from '../capabilities/queue/queue-operator.ts';
import type { PaperReviews } from '../capabilities/papers/paper-reviews.ts';
import type { PaperDrafting } from '../capabilities/papers/paper-drafting.ts';
import type { PaperPackages } from '../capabilities/papers/paper-packages.ts';
import type { Core } from '../capabilities/core/core-ingest.ts';
import type { Store } from '../platform/store/store.ts';
import type { ServiceMetrics } from '../platform/http/metrics.ts';

export interface TemporalHealth {
  ok: boolean;
  address: string;
  namespace: string;
  worker_state: string;
  ui_url?: string;
  error?: string;
}

/**
 * What the control plane's routes need: the services the composition root (bin/compose.ts) built once, and what the
 * serving process adds. Routes take them as given and build none.
 */
export interface AppDeps {
  store: Store;
  controlApiToken: string;
  sessionCookieSecure: boolean;
  /** Absent in tests of the HTTP layer alone: /control/health then reports the store only. */
  temporalHealth?: () => Promise<TemporalHealth>;
  dbPath: string;
  /** Workload class of promoted projects whose candidate names none (config default_workload_class). */
  defaultWorkloadClass: WorkloadClass;
  /** Present when this process also serves the worker gate role: /healthz answers 503 until the gate is ready. */
  workerGateReady?: () => boolean;
  /** Present with workerGateReady: how that gate confines its agents, which /control/health reports. */
  workerGateIsolation?: () => AgentIsolation;
  /** How the gate in this process contains each run (its own cgroup, or its process tree); present with the gate. */
  workerGateRunCgroups?: () => RunCgroupsStatus;
  /** The replicas sharing this database and whether their configs agree; absent on a read-only store and in tests of the HTTP layer alone. */
  clusterConfig?: () => Promise<ClusterConfigView>;
  /** Worker targets, lanes and dispatch switches from config. */
  dispatch: DispatchSettings;
  /** Starts, signals and cancels run workflows. */
  runs: RunLauncher;
  /** Paper drafting: where drafts go, the writer, evidence sync, and the paper workflows. */
  papers: { settings: PaperSettings; launcher: PaperLauncher };
  /** Core (/svc-core): core_mode and core_enforce_enabled. */
  core: CoreSettings;
  /** Core's snapshots and health, on these settings. */
  coreSnapshots: Core;
  /** The operator's queue commands: pause, resume, park, requeue. */
  queueOperator: QueueOperator;
  /** Paper reviews: claim, verdicts, finalization. */
  paperReviews: PaperReviews;
  /** Paper drafting on the paper settings and launcher. */
  paperDrafting: PaperDrafting;
  /** Paper packages on the paper settings. */
  paperPackages: PaperPackages;
  /** Queue alerts: hang and cooldown limits, and the push and webhook channels that are on. */
  alerts: AlertSettings;
  /** Starts research-cycle workflows and waits for their reports. */
  cycles: CycleLauncher;
  /** The Research Facility: intake, planning and promotion into the queue. */
  facility: ResearchFacility;
  /** queue_pump_enabled and its parts: GET /control/api/v1/why says whether queued items go without a person. */
  pump: PumpDeps['pump'];
  /** The research provider (research_provider_* and RESEARCH_PROVIDER_API_KEY) and its budget limits. */
  researchProvider: ProviderBatchSettings;
  /** legacy_notes_api_enabled: serve GET /control/api/intake/legacy-notes. */
  legacyNotesApiEnabled: boolean;
  /** This process's Prometheus registry (GET /metrics); the callback and dispatch routes count their outcomes in it. */
  metrics: ServiceMetrics;
}
