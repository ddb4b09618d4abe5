import type { AppDeps } from '../api/deps.ts';
import type { createActivities } from '../activities/index.ts';
import type { WorkloadClass } from '../worker-gate/contract/workload.ts';
import { createCore, type Core, type CoreSettings } from '../capabilities/core/core-ingest.ts';
import { createQueueOperator, type QueueOperator } from '../capabilities/queue/queue-operator.ts';
import { createPaperDrafting, type PaperDrafting } from '../capabilities/papers/paper-drafting.ts';
import { createPaperPackages, type PaperPackages } from '../capabilities/papers/paper-packages.ts';
import { createPaperReviews, type PaperReviews } from '../capabilities/papers/paper-reviews.ts';
import type { CycleLauncher } from '../capabilities/automation/cycle-launcher.ts';
import { alertSettingsFrom, type AlertSettings } from '../capabilities/automation/queue-alerts.ts';
import type { PumpDeps } from '../capabilities/automation/queue-pump.ts';
import type { PaperLauncher } from '../capabilities/papers/paper-launcher.ts';
import { paperSettingsFrom, type PaperSettings } from '../capabilities/papers/paper-settings.ts';
import { providerBatchSettingsFrom, type ProviderBatchSettings } from '../capabilities/research/provider-batch.ts';
import { createResearchFacility, type ResearchFacility } from '../capabilities/research/research-facility.ts';
import { dispatchSettingsFrom, type DispatchSettings } from '../capabilities/runs/dispatch-settings.ts';
import type { RunLauncher } from '../capabilities/runs/run-launcher.ts';
import type { Config } from '../platform/config/schema.ts';
import type { OperationalTrace } from '../platform/observability/operational-trace.ts';
import type { Store } from '../platform/store/store.ts';

/** What the config alone decides for the services, read from it once. */
export interface ServiceSettings {
  /** default_workload_class: the workload class of promoted projects whose candidate names none. */
  defaultWorkloadClass: WorkloadClass;
  dispatch: DispatchSettings;
  papers: PaperSettings;
  researchProvider: ProviderBatchSettings;
  alerts: AlertSettings;
  core: CoreSettings;
  /** queue_pump_enabled, queue_pump_followup_launch_enabled and queue_pump_paper_draft_enabled. */
  pump: PumpDeps['pump'];
}

export function serviceSettingsFrom(config: Config, trace?: OperationalTrace): ServiceSettings {
  return {
    defaultWorkloadClass: config.default_workload_class,
    dispatch: dispatchSettingsFrom(config, trace),
    papers: paperSettingsFrom(config),
    researchProvider: providerBatchSettingsFrom(config),
    alerts: alertSettingsFrom(config),
    core: { mode: config.core_mode, enforceEnabled: config.core_enforce_enabled },
    pump: {
      enabled: config.queue_pump_enabled,
      followupLaunch: config.queue_pump_followup_launch_enabled,
      paperDraft: config.queue_pump_paper_draft_enabled,
    },
  };
}

/** The clients of the workflows this process starts, signals and awaits. */
export interface Launchers {
  runs: RunLauncher;
  papers: PaperLauncher;
  cycles: CycleLauncher;
}

/**
 * Every service of one control plane, each built once: the HTTP routes (`routeDeps`) and the Temporal worker's
 * activities (`activityDeps`) are handed these same objects. It satisfies the automation activities' deps as it is.
 */
export interface Services {
  store: Store;
  defaultWorkloadClass: WorkloadClass;
  dispatch: DispatchSettings;
  runs: RunLauncher;
  papers: { settings: PaperSettings; launcher: PaperLauncher };
  cycles: CycleLauncher;
  facility: ResearchFacility;
  researchProvider: ProviderBatchSettings;
  alerts: AlertSettings;
  core: CoreSettings;
  pump: PumpDeps['pump'];
  coreSnapshots: Core;
  queueOperator: QueueOperator;
  paperReviews: PaperReviews;
  paperDrafting: PaperDrafting;
  paperPackages: PaperPackages;
}

/**
 * Builds the services from the store, the config's settings and the launchers. Tests and benches pass `overrides`:
 * a service given there replaces the one built here, and the rest are built on the overridden store and settings.
 */
export function composeServices(parts: { store: Store; settings: ServiceSettings; launchers: Launchers }, overrides: Partial<Services> = {}): Services {
  const { settings, launchers } = parts;
  const store = overrides.store ?? parts.store;
  const defaultWorkloadClass = overrides.defaultWorkloadClass ?? settings.defaultWorkloadClass;
  const papers = overrides.papers ?? { settings: settings.papers, launcher: launchers.papers };
  const core = overrides.core ?? settings.core;
  return {
    store,
    defaultWorkloadClass,
    dispatch: overrides.dispatch ?? settings.dispatch,
    runs: overrides.runs ?? launchers.runs,
    papers,
    cycles: overrides.cycles ?? launchers.cycles,
    facility: overrides.facility ?? createResearchFacility(store, { defaultWorkloadClass }),
    researchProvider: overrides.researchProvider ?? settings.researchProvider,
    alerts: overrides.alerts ?? settings.alerts,
    core,
    pump: overrides.pump ?? settings.pump,
    coreSnapshots: overrides.coreSnapshots ?? createCore(store, core),
    queueOperator: overrides.queueOperator ?? createQueueOperator(store),
    paperReviews: overrides.paperReviews ?? createPaperReviews(store),
    paperDrafting: overrides.paperDrafting ?? createPaperDrafting({ store, ...papers }),
    paperPackages: overrides.paperPackages ?? createPaperPackages(store, papers.settings),
  };
}

/** What belongs to the serving process rather than to the services: its token, health probes, metrics, switches. */
export type ProcessDeps = Omit<AppDeps, keyof Services>;

/** The routes' deps: the services, and what the serving process adds. */
export function routeDeps(services: Services, process: ProcessDeps): AppDeps {
  return { ...services, ...process };
}

/** The Temporal worker's activities' deps, on the same services the routes get. */
export function activityDeps(services: Services): Parameters<typeof createActivities>[0] {
  return { store: services.store, settings: services.dispatch, papers: services.papers.settings, automation: services };
}
