import { describe, expect, it } from 'vitest';
import { BUILT_IN_WORKLOAD_PROFILES, WORKLOAD_CLASSES, resolveWorkloadProfile } from '../../worker-gate/contract/workload.ts';
import type { GateThresholdProfile } from '../../worker-gate/contract/workload.ts';

const GLOBAL: GateThresholdProfile = {
  idle_sustain_sec: 999,
  cpu_idle_threshold_pct: 50,
  gpu_idle_avg_threshold_pct: 40,
  gpu_idle_peak_threshold_pct: 45,
  vram_delta_threshold_mib: 4096,
};

describe('workload profiles', () => {
  it('lists the seven workload classes', () => {
    expect(WORKLOAD_CLASSES).toEqual([
      'unknown',
      'cpu_only',
      'gpu_required',
      'inference_eval',
      'training',
      'control_plane',
      'agent_harness',
    ]);
  });

  it('gives inference_eval a longer sustain and a lower CPU threshold than training', () => {
    const inference = resolveWorkloadProfile('inference_eval', GLOBAL);
    const training = resolveWorkloadProfile('training', GLOBAL);
    expect(inference.idle_sustain_sec).toBeGreaterThan(training.idle_sustain_sec);
    expect(inference.cpu_idle_threshold_pct).toBeLessThan(training.cpu_idle_threshold_pct);
  });

  it('has built-in profiles for inference_eval, training, cpu_only and gpu_required', () => {
    expect(Object.keys(BUILT_IN_WORKLOAD_PROFILES).sort()).toEqual(['cpu_only', 'gpu_required', 'inference_eval', 'training']);
  });

  it('lets a built-in profile win over the global thresholds', () => {
    expect(resolveWorkloadProfile('training', GLOBAL)).toEqual(BUILT_IN_WORKLOAD_PROFILES.training);
  });

  it('uses the global thresholds for a class without a built-in profile', () => {
    expect(resolveWorkloadProfile('agent_harness', GLOBAL)).toEqual(GLOBAL);
  });

  it('lets a configured override win over the built-in profile, field by field', () => {
    const resolved = resolveWorkloadProfile('inference_eval', GLOBAL, {
      inference_eval: { idle_sustain_sec: 900 },
      training: { idle_sustain_sec: 31 },
    });
    expect(resolved).toEqual({ ...BUILT_IN_WORKLOAD_PROFILES.inference_eval, idle_sustain_sec: 900 });
  });

  it('layers an override over the global thresholds for a class without a built-in profile', () => {
    expect(resolveWorkloadProfile('unknown', GLOBAL, { unknown: { cpu_idle_threshold_pct: 12 } })).toEqual({
      ...GLOBAL,
      cpu_idle_threshold_pct: 12,
    });
  });

  it('reads only the threshold fields from a larger object such as the whole config', () => {
    const configLike = { ...GLOBAL, listen_port: 8787, control_api_bearer_token: 'x'.repeat(32) };
    expect(Object.keys(resolveWorkloadProfile('control_plane', configLike)).sort()).toEqual(Object.keys(GLOBAL).sort());
  });
});
