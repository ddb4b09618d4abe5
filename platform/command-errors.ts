export type CommandRefusedStatus = 400 | 403 | 404 | 409 | 422 | 424 | 501 | 502 | 503 | 504;

/**
 * A command refused, or not carried out, for a reason the caller can act on (unknown id, wrong state, a worker that
 * failed, a feature switched off). The HTTP layer answers it with its status and `{"detail": ...}`; a workflow sees
 * it as a non-retryable failure.
 */
export class CommandRefusedError extends Error {
  readonly status: CommandRefusedStatus;
  /** A message, or (for 422) one `{loc, msg, type}` entry per problem, as docs/http.md#http-conventions describes. */
  readonly detail: string | Record<string, unknown> | readonly Record<string, unknown>[];

  constructor(status: CommandRefusedStatus, detail: string | Record<string, unknown> | readonly Record<string, unknown>[]) {
    super(typeof detail === 'string' ? detail : `command refused (${status})`);
    this.status = status;
    this.detail = detail;
    this.name = 'CommandRefusedError';
  }
}

/** A refusal as one line of text: its message, or its detail's `message`, or the detail as JSON. */
export function refusalMessage(error: CommandRefusedError): string {
  const detail = error.detail;
  if (typeof detail === 'string') return detail;
  if (!Array.isArray(detail) && typeof (detail as { message?: unknown }).message === 'string') return (detail as { message: string }).message;
  return JSON.stringify(detail);
}

/** A refusal as an idempotency key keeps it: the `{detail}` its HTTP answer carried. */
export interface KeptRefusal {
  detail: CommandRefusedError['detail'];
}

/** The refusal a key settled with (any status but 200), as the error its first call threw. */
export function keptRefusalError(settled: { response: unknown; status_code: number }): CommandRefusedError {
  return new CommandRefusedError(settled.status_code as CommandRefusedStatus, (settled.response as KeptRefusal).detail);
}

/** A settled key's answer, again: the first call's answer (status 200), or its refusal thrown again. */
export function replayAnswer<R>(settled: { response: R | KeptRefusal; status_code: number }): R {
  if (settled.status_code === 200) return settled.response as R;
  throw keptRefusalError(settled);
}
