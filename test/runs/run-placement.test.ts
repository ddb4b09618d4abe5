import { describe, expect, it } from 'vitest';
import { planPlacement, runNeedsOf, type GateGpu } from '../../capabilities/runs/domain/run-placement.ts';
import { workerRoutingFrom, type WorkerLane } from '../../capabilities/runs/domain/worker-lanes.ts';

const routing = workerRoutingFrom({
  worker_targets: {
    'gpu-box': { wake_gate_url: 'http://127.0.0.1:9001', bearer_token: 'gate-token-0123456789abcdef', role: 'gpu_worker', slots: 4 },
    'two-of-four': { wake_gate_url: 'http://127.0.0.1:9002', bearer_token: 'gate-token-0123456789abcdef', role: 'gpu_worker', gpus: [2, 3] },
    'cpu-box': { wake_gate_url: 'http://127.0.0.1:9003', bearer_token: 'gate-token-0123456789abcdef', role: 'cpu_worker', slots: 2 },
  },
  workload_machine_targets: {},
  workload_run_needs: { training: { gpu_count: 2, gpu_memory_mib: 20_000 }, cpu_only: { cpu_count: 4 } },
});
const lane = (name: string): WorkerLane => routing.lanes.get(name)!;
const gpu = (index: number, free: number, run_id: string | null = null): GateGpu => ({ index, memory_total_mib: 24_576, memory_free_mib: free, run_id });
const FOUR_IDLE = { ok: true as const, gpus: [0, 1, 2, 3].map((index) => gpu(index, 23_552)) };
const needs = (gpu_count: number, gpu_memory_mib = 0) => ({ gpu_count, gpu_memory_mib, cpu_count: null });

describe('slots of a worker target', () => {
  it('are lanes named after the target, the first slot the target itself', () => {
    expect([...routing.lanes.keys()]).toEqual(['gpu-box', 'gpu-box/2', 'gpu-box/3', 'gpu-box/4', 'two-of-four', 'cpu-box', 'cpu-box/2']);
    expect(lane('gpu-box/3')).toMatchObject({ name: 'gpu-box', slot: 3, slots: 4 });
  });
});

describe("a run's needs", () => {
  it("are the item's own figures, else its workload class's defaults, else none", () => {
    const stated = { gpu_count: null, gpu_memory_mib: null, cpu_count: null };
    expect(runNeedsOf({ workload_class: 'training', ...stated }, routing.classNeeds)).toEqual({ gpu_count: 2, gpu_memory_mib: 20_000, cpu_count: null });
    expect(runNeedsOf({ workload_class: 'training', ...stated, gpu_count: 1 }, routing.classNeeds)).toEqual({ gpu_count: 1, gpu_memory_mib: 20_000, cpu_count: null });
    expect(runNeedsOf({ workload_class: 'cpu_only', ...stated }, routing.classNeeds)).toEqual({ gpu_count: 0, gpu_memory_mib: 0, cpu_count: 4 });
    expect(runNeedsOf({ workload_class: 'unknown', ...stated }, routing.classNeeds)).toEqual({ gpu_count: 0, gpu_memory_mib: 0, cpu_count: null });
  });
});

describe('placing a run', () => {
  it('gives a run that needs no GPU the whole machine on a one-slot target, and no GPU on a shared one', () => {
    expect(planPlacement({ lane: lane('two-of-four'), needs: needs(0), held: new Map(), gpus: null })).toMatchObject({ ok: true, gpu_indices: null });
    expect(planPlacement({ lane: lane('gpu-box/2'), needs: needs(0), held: new Map(), gpus: null })).toMatchObject({ ok: true, gpu_indices: [] });
    expect(planPlacement({ lane: lane('cpu-box/2'), needs: { ...needs(0), cpu_count: 4 }, held: new Map(), gpus: null })).toMatchObject({ ok: true, gpu_indices: null, cpu_count: 4 });
  });

  it('takes the lowest free GPUs, passing over those other runs hold', () => {
    const held = new Map([[0, 'run-a'], [2, 'run-b']]);
    expect(planPlacement({ lane: lane('gpu-box/3'), needs: needs(1), held, gpus: FOUR_IDLE })).toEqual({ ok: true, gpu_indices: [1], cpu_count: null, reason: 'on gpu-box (slot 3 of 4), GPU 1' });
    expect(planPlacement({ lane: lane('gpu-box/3'), needs: needs(2), held: new Map([[0, 'run-a']]), gpus: FOUR_IDLE })).toMatchObject({ ok: true, gpu_indices: [1, 2] });
  });

  it('waits for two free GPUs, naming who holds the others', () => {
    const held = new Map([[0, 'run-a'], [1, 'run-b'], [2, 'run-c']]);
    const placed = planPlacement({ lane: lane('gpu-box/4'), needs: needs(2), held, gpus: FOUR_IDLE });
    expect(placed).toEqual({ ok: false, reason: 'needs 2 GPUs on gpu-box, only 1 is free (GPU 0 held by run-a; GPU 1 held by run-b; GPU 2 held by run-c)' });
  });

  it('counts a GPU its gate shows a run on as held, and one with too little memory free as not free', () => {
    const gpus = { ok: true as const, gpus: [gpu(0, 23_552, 'run-the-ledger-lost'), gpu(1, 4_000), gpu(2, 23_552), gpu(3, 23_552)] };
    expect(planPlacement({ lane: lane('gpu-box'), needs: needs(1, 8_000), held: new Map(), gpus })).toMatchObject({ ok: true, gpu_indices: [2] });
    const reason = planPlacement({ lane: lane('gpu-box'), needs: needs(3, 8_000), held: new Map(), gpus });
    expect(reason).toEqual({ ok: false, reason: 'needs 3 GPUs with 8000 MiB free on each on gpu-box, only 2 are free (GPU 0 held by run-the-ledger-lost; GPU 1 has 4000 MiB free)' });
  });

  it('refuses a need no GPU of the target could ever meet, saying what the largest has', () => {
    expect(planPlacement({ lane: lane('gpu-box'), needs: needs(1, 80_000), held: new Map(), gpus: FOUR_IDLE })).toEqual({
      ok: false,
      reason: 'needs 1 GPU with 80000 MiB free on each, but the largest GPU of gpu-box has 24576 MiB',
    });
    expect(planPlacement({ lane: lane('gpu-box'), needs: needs(5), held: new Map(), gpus: FOUR_IDLE })).toEqual({ ok: false, reason: 'needs 5 GPUs, but gpu-box offers 4 GPUs' });
  });

  it('places only on the GPUs the target offers', () => {
    expect(planPlacement({ lane: lane('two-of-four'), needs: needs(1), held: new Map(), gpus: FOUR_IDLE })).toMatchObject({ ok: true, gpu_indices: [2] });
    expect(planPlacement({ lane: lane('two-of-four'), needs: needs(3), held: new Map(), gpus: FOUR_IDLE })).toEqual({
      ok: false,
      reason: 'needs 3 GPUs, but two-of-four offers 2 GPUs of its configured 2, 3 that its gate reports',
    });
  });

  it('refuses a GPU need on a CPU worker and on a gate whose GPUs cannot be read', () => {
    expect(planPlacement({ lane: lane('cpu-box'), needs: needs(1), held: new Map(), gpus: null })).toEqual({ ok: false, reason: 'needs 1 GPU, but cpu-box is a cpu_worker' });
    expect(planPlacement({ lane: lane('gpu-box'), needs: needs(1), held: new Map(), gpus: { ok: false, reason: 'connection refused' } })).toEqual({
      ok: false,
      reason: "needs 1 GPU, but gpu-box's GPUs could not be read: connection refused",
    });
  });
});
