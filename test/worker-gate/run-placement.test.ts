import { describe, expect, it } from 'vitest';
import { placeRun, type PlacementInput, type SlotHolder } from '../../worker-gate/domain/run-placement.ts';
import { formatCpuList, parseCpuList } from '../../worker-gate/run-cgroups/index.ts';

/** Four GPUs nvidia-smi lists, four CPUs the gate may pin runs to, four slots. */
const FOUR_GPUS = { indices: [0, 1, 2, 3], source: 'nvidia-smi reports GPUs 0, 1, 2, 3' };

function place(request: PlacementInput['request'], holders: SlotHolder[], overrides: Partial<PlacementInput> = {}) {
  return placeRun({ request, slots: 4, holders, offeredGpus: () => FOUR_GPUS, pinnableCpus: [0, 1, 2, 3], ...overrides });
}

const holder = (run_id: string, gpu_indices: number[] | null, cpus: number[] | null = null): SlotHolder => ({ run_id, gpu_indices, cpus });

describe('placing a run on its gate', () => {
  it('takes a free slot; a run given no GPU or CPU is not pinned', () => {
    expect(place({ run_id: 'r' }, [holder('a', null)])).toEqual({ ok: true, cpus: null });
  });

  it('refuses when every slot is held, naming the slots and the runs holding them', () => {
    expect(place({ run_id: 'r' }, [holder('a', null)], { slots: 1 })).toEqual({ ok: false, reason: 'all 1 slots hold runs: a' });
    const full = [holder('a', [0]), holder('b', [1]), holder('c', [2]), holder('d', [3])];
    expect(place({ run_id: 'r', gpu_indices: [] }, full)).toEqual({ ok: false, reason: 'all 4 slots hold runs: a, b, c, d' });
  });

  it("does not count the run's own hold against it", () => {
    expect(place({ run_id: 'r', gpu_indices: [0] }, [holder('r', [0])], { slots: 1 })).toEqual({ ok: true, cpus: null });
  });

  it('refuses a GPU the gate does not offer, and one another run holds, naming it', () => {
    expect(place({ run_id: 'r', gpu_indices: [1, 7] }, [])).toEqual({ ok: false, reason: 'GPU 7 is not offered by this gate (nvidia-smi reports GPUs 0, 1, 2, 3)' });
    expect(place({ run_id: 'r', gpu_indices: [2, 3] }, [holder('a', [0, 2]), holder('b', [3])])).toEqual({
      ok: false,
      reason: "GPU 2 is held by run 'a'; GPU 3 is held by run 'b'",
    });
    expect(place({ run_id: 'r', gpu_indices: [1] }, [holder('a', [0, 2]), holder('u', null)])).toEqual({ ok: true, cpus: null });
  });

  it('asks for the offered GPUs only when the run names some', () => {
    const unasked = () => {
      throw new Error('asked');
    };
    expect(place({ run_id: 'r', gpu_indices: [] }, [], { offeredGpus: unasked })).toEqual({ ok: true, cpus: null });
  });

  it('pins the lowest free CPUs, and refuses when too few are free, naming the runs pinned to the others', () => {
    expect(place({ run_id: 'r', cpu_count: 2 }, [holder('a', null, [0, 2])])).toEqual({ ok: true, cpus: [1, 3] });
    expect(place({ run_id: 'r', cpu_count: 3 }, [holder('a', null, [0, 2])])).toEqual({
      ok: false,
      reason: "cpu_count 3: only 2 of this gate's 4 CPUs are free (1, 3); pinned runs hold the others: a",
    });
  });

  it('leaves the run unpinned where the gate cannot pin CPUs', () => {
    expect(place({ run_id: 'r', cpu_count: 64 }, [], { pinnableCpus: null })).toEqual({ ok: true, cpus: null });
  });
});

describe('kernel CPU lists', () => {
  it('read ranges and single CPUs, and write consecutive CPUs as ranges', () => {
    expect(parseCpuList('0-3,8,10-11\n')).toEqual([0, 1, 2, 3, 8, 10, 11]);
    expect(parseCpuList('')).toEqual([]);
    expect(parseCpuList('3-1')).toEqual([]);
    expect(parseCpuList('x')).toEqual([]);
    expect(formatCpuList([5, 0, 1, 2, 7, 8])).toBe('0-2,5,7-8');
    expect(formatCpuList([])).toBe('');
  });
});
