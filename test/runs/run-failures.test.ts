import { describe, expect, it } from 'vitest';
import { gateFailureDetails, isRejectedWrite } from '../../capabilities/runs/domain/run-failures.ts';

describe('gate failure details', () => {
  it('read the status a gate activity attached', () => {
    expect(gateFailureDetails([{ status: 502 }])).toEqual({ status: 502 });
    expect(gateFailureDetails([{ status: null }])).toEqual({ status: null });
  });

  it('read anything else as no status', () => {
    for (const details of [undefined, null, [], [null], ['502'], [{ status: '502' }], [{ status: 1.5 }], [{}]]) {
      expect(gateFailureDetails(details)).toEqual({ status: null });
    }
  });
});

describe('rejected writes', () => {
  it('are data exceptions and integrity violations other than a unique violation', () => {
    expect(['22P02', '22001', '23514', '23503', '23502'].filter(isRejectedWrite)).toEqual(['22P02', '22001', '23514', '23503', '23502']);
    expect(['23505', '40001', '57P01', '08006', undefined, 42, '2350'].filter(isRejectedWrite)).toEqual([]);
  });
});
