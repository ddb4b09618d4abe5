import { Metadata, status } from '@grpc/grpc-js';
import { Client, ScheduleNotFoundError, ServiceError } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { describe, expect, inject, it } from 'vitest';
import { isTransientTemporalError, retryingTransient } from '../../platform/temporal/temporal-retry.ts';

/**
 * The start-up's schedule calls (capabilities/automation/schedules.ts) are tried again when the Temporal server answers that it ran
 * out of time: a loaded CI machine once ended a start with "Failed to describe schedule: 4 DEADLINE_EXCEEDED: context
 * deadline exceeded", a deadline inside the server that a test cannot bring about on demand. The errors here have the
 * shape the client throws then: a ServiceError whose cause is the gRPC error.
 */

function grpcFailure(code: status, details: string): ServiceError {
  const grpc = Object.assign(new Error(`${code} ${status[code]}: ${details}`), { code, details, metadata: new Metadata() });
  return new ServiceError(`Failed to describe schedule: ${grpc.message}`, { cause: grpc });
}

describe('retryingTransient', () => {
  it('tries a call again while the server answers DEADLINE_EXCEEDED or UNAVAILABLE, and answers its result', async () => {
    const failures = [grpcFailure(status.DEADLINE_EXCEEDED, 'context deadline exceeded'), grpcFailure(status.UNAVAILABLE, 'connection refused')];
    let calls = 0;
    const result = await retryingTransient(async () => {
      calls += 1;
      const failure = failures.shift();
      if (failure) throw failure;
      return 'set';
    }, 10_000);
    expect(result).toBe('set');
    expect(calls).toBe(3);
  });

  it('tries a call again after the native connection reports a broken HTTP/2 stream, whatever code it gives', async () => {
    // The native connection's error: its message is the transport's own words, with no code prefix.
    const broken = (code: status) => {
      const grpc = Object.assign(new Error('h2 protocol error: http2 error'), { code, details: 'h2 protocol error: http2 error', metadata: new Metadata() });
      return new ServiceError(`Failed to describe schedule: ${grpc.message}`, { cause: grpc });
    };
    const failures = [broken(status.INTERNAL), broken(status.UNKNOWN)];
    let calls = 0;
    const result = await retryingTransient(async () => {
      calls += 1;
      const failure = failures.shift();
      if (failure) throw failure;
      return 'described';
    }, 10_000);
    expect(result).toBe('described');
    expect(calls).toBe(3);
    expect(isTransientTemporalError(grpcFailure(status.INTERNAL, 'workflow task failed'))).toBe(false);
  });

  it('throws any other failure at once, and a transient one once the time is up', async () => {
    const invalid = grpcFailure(status.INVALID_ARGUMENT, 'bad spec');
    expect(isTransientTemporalError(invalid)).toBe(false);
    let calls = 0;
    await expect(retryingTransient(async () => ((calls += 1), Promise.reject(invalid)), 10_000)).rejects.toBe(invalid);
    expect(calls).toBe(1);

    const slow = grpcFailure(status.DEADLINE_EXCEEDED, 'context deadline exceeded');
    const started = Date.now();
    await expect(retryingTransient(() => Promise.reject(slow), 1_200)).rejects.toBe(slow);
    expect(Date.now() - started).toBeLessThan(2_500);
  });
});

describe('a call past its own deadline', () => {
  it('is transient as the native connection reports it (CANCELLED, "Timeout expired"), and a retry with time answers', async () => {
    const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    try {
      const client = new Client({ connection });
      const describe = (deadline: number) => client.withDeadline(deadline, () => client.schedule.getHandle('no-such-schedule').describe());
      // A deadline of now: most tries end in the connection's own timeout; some in the server's DEADLINE_EXCEEDED or a
      // stream the server reset, so it tries until it has the first kind.
      let expired: unknown = null;
      for (let tries = 0; tries < 50 && !(expired instanceof ServiceError && expired.cause?.message === 'Timeout expired'); tries += 1) {
        expired = await describe(Date.now()).then(
          () => null,
          (error: unknown) => error,
        );
      }
      expect(expired).toBeInstanceOf(ServiceError);
      expect((expired as ServiceError).cause).toMatchObject({ code: status.CANCELLED, message: 'Timeout expired' });
      expect(isTransientTemporalError(expired)).toBe(true);

      let calls = 0;
      const answered = await retryingTransient(async () => {
        calls += 1;
        if (calls === 1) throw expired;
        return describe(Date.now() + 10_000);
      }, 10_000).catch((error: unknown) => error);
      // The second call reaches the server, which answers that the schedule does not exist: not transient, so thrown.
      expect(calls).toBe(2);
      expect(answered).toBeInstanceOf(ScheduleNotFoundError);
    } finally {
      await connection.close();
    }
  });
});
