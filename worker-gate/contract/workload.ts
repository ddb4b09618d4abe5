export const WORKLOAD_CLASSES = [
  'unknown',
  'cpu_only',
  'gpu_required',
  'inference_eval',
  'training',
  'control_plane',
  'agent_harness',
] as const;

export type WorkloadClass = (typeof WORKLOAD_CLASSES)[number];

/** Thresholds the worker gate uses to decide that a workload has gone idle. */
export type GateThresholdProfile = {
  idle_sustain_sec: number;
  cpu_idle_threshold_pct: number;
  gpu_idle_avg_threshold_pct: number;
  gpu_idle_peak_threshold_pct: number;
  vram_delta_threshold_mib: number;
};

export const GATE_THRESHOLD_FIELDS = [
  'idle_sustain_sec',
  'cpu_idle_threshold_pct',
  'gpu_idle_avg_threshold_pct',
  'gpu_idle_peak_threshold_pct',
  'vram_delta_threshold_mib',
] as const satisfies readonly (keyof GateThresholdProfile)[];

export type WorkloadProfileOverrides = Partial<Record<WorkloadClass, Partial<GateThresholdProfile>>>;

// Evaluation runs have long quiet stretches between batches (loading checkpoints, scoring),
// so they need a longer sustain window and a stricter CPU threshold than training before
// they are called idle.
export const BUILT_IN_WORKLOAD_PROFILES: Readonly<Partial<Record<WorkloadClass, Readonly<GateThresholdProfile>>>> = {
  training: {
    idle_sustain_sec: 180,
    cpu_idle_threshold_pct: 35,
    gpu_idle_avg_threshold_pct: 10,
    gpu_idle_peak_threshold_pct: 20,
    vram_delta_threshold_mib: 1024,
  },
  inference_eval: {
    idle_sustain_sec: 300,
    cpu_idle_threshold_pct: 20,
    gpu_idle_avg_threshold_pct: 5,
    gpu_idle_peak_threshold_pct: 15,
    vram_delta_threshold_mib: 512,
  },
  // No GPU in play: GPU and VRAM thresholds are set so they never hold the gate shut.
  cpu_only: {
    idle_sustain_sec: 120,
    cpu_idle_threshold_pct: 15,
    gpu_idle_avg_threshold_pct: 100,
    gpu_idle_peak_threshold_pct: 100,
    vram_delta_threshold_mib: 1_000_000,
  },
  gpu_required: {
    idle_sustain_sec: 240,
    cpu_idle_threshold_pct: 30,
    gpu_idle_avg_threshold_pct: 5,
    gpu_idle_peak_threshold_pct: 15,
    vram_delta_threshold_mib: 512,
  },
};

function overlay(base: GateThresholdProfile, layer: Partial<GateThresholdProfile> | undefined): GateThresholdProfile {
  const out = { ...base };
  if (!layer) return out;
  for (const field of GATE_THRESHOLD_FIELDS) {
    const value = layer[field];
    if (value !== undefined) out[field] = value;
  }
  return out;
}

/**
 * Thresholds for a workload class. Precedence, lowest first: the global thresholds
 * (only the five threshold fields are read, so a whole config object may be passed),
 * the built-in profile for the class, then the configured override for the class.
 */
export function resolveWorkloadProfile(
  cls: WorkloadClass,
  globalDefaults: GateThresholdProfile,
  overrides: WorkloadProfileOverrides = {},
): GateThresholdProfile {
  const global = Object.fromEntries(
    GATE_THRESHOLD_FIELDS.map((field) => [field, globalDefaults[field]]),
  ) as GateThresholdProfile;
  return overlay(overlay(global, BUILT_IN_WORKLOAD_PROFILES[cls]), overrides[cls]);
}

export function isWorkloadClass(value: unknown): value is WorkloadClass {
  return typeof value === 'string' && (WORKLOAD_CLASSES as readonly string[]).includes(value);
}
