import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { ConfigFingerprint } from '../config/fingerprint.ts';
import { liveReplicas, removeReplica, reportReplica, type ReplicaRow } from './replica-ledger.ts';
import type { Store } from '../store/store.ts';

/**
 * The control-plane replicas of one cluster, as they find each other through the database they share
 * (docs/operations.md#running-on-several-machines): each reports itself with its config fingerprint every REPORT_EVERY_MS, and a replica not heard
 * from for REPLICA_LOST_AFTER_MS is gone. A config that differs between the live replicas is drift: shown on
 * /control/health, logged at start, and in rcp_config_info for Prometheus to compare.
 */

export const REPORT_EVERY_MS = 10_000;
export const REPLICA_LOST_AFTER_MS = 30_000;

export interface ReplicaView {
  replica_id: string;
  config_fingerprint: string;
  started_at: string;
  last_seen_at: string;
}

export interface ClusterConfigView {
  /** This replica. */
  replica_id: string;
  config_fingerprint: string;
  /** The live replicas, this one included, oldest first. */
  replicas: ReplicaView[];
  /** The live replicas do not all share one fingerprint. */
  drift: boolean;
  /** The config fields the live replicas disagree on, by name (never a value). */
  differing_fields: string[];
}

/** What the live replicas' reports say about their configs, from this replica's point of view. */
export function clusterConfigOf(self: { replica_id: string; config: ConfigFingerprint }, rows: ReplicaRow[]): ClusterConfigView {
  const fingerprints = new Set(rows.map((row) => row.config_fingerprint));
  const fieldNames = new Set(rows.flatMap((row) => Object.keys(row.config_fields)));
  const differing = [...fieldNames].filter((name) => new Set(rows.map((row) => row.config_fields[name])).size > 1).sort();
  return {
    replica_id: self.replica_id,
    config_fingerprint: self.config.fingerprint,
    replicas: rows.map(({ replica_id, config_fingerprint, started_at, last_seen_at }) => ({ replica_id, config_fingerprint, started_at, last_seen_at })),
    drift: fingerprints.size > 1,
    differing_fields: differing,
  };
}

export class ReplicaRegistry {
  readonly replicaId: string;
  readonly config: ConfigFingerprint;
  private readonly workerLanes: string[];
  private readonly store: Store;
  private timer: NodeJS.Timeout | undefined;

  /**
   * `workerLanes`: the names of its worker targets. `label` names this replica to an operator beside its host (its
   * port); a random suffix makes each start a new replica.
   */
  constructor(store: Store, config: ConfigFingerprint, workerLanes: readonly string[], label: string) {
    this.store = store;
    this.config = config;
    this.workerLanes = [...workerLanes].sort();
    this.replicaId = `${hostname()}:${label}:${randomBytes(3).toString('hex')}`;
  }

  /** Reports this replica now and then every REPORT_EVERY_MS; answers the cluster's config as it stands. */
  async start(onReportFailed: (error: unknown) => void): Promise<ClusterConfigView> {
    await this.report();
    this.timer = setInterval(() => this.report().catch(onReportFailed), REPORT_EVERY_MS);
    this.timer.unref();
    return this.view();
  }

  async view(): Promise<ClusterConfigView> {
    return clusterConfigOf({ replica_id: this.replicaId, config: this.config }, await liveReplicas(this.store, REPLICA_LOST_AFTER_MS));
  }

  /** Stops reporting and leaves the cluster at once (a clean stop is not a lost replica). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await removeReplica(this.store, this.replicaId).catch(() => undefined);
  }

  private report(): Promise<void> {
    return reportReplica(this.store, { replica_id: this.replicaId, config_fingerprint: this.config.fingerprint, config_fields: this.config.fields, worker_lanes: this.workerLanes }, REPLICA_LOST_AFTER_MS);
  }
}
