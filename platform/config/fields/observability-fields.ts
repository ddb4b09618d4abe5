import { z } from 'zod';
import { HTTP_URL_REASON, doc, isHttpUrl, text } from './field-kinds.ts';

/** The platform's fields of observability: the route log, the operational trace, OpenTelemetry tracing. */
export const observabilityFields = {
  route_observability_enabled: doc(z.boolean().default(false), {
    perReplica: true,
    description: 'Write one JSON line per request (route template, status, duration, RSS) to the route log, rotated at 10 MiB.',
  }),
  route_observability_log_path: doc(text().default(''), {
    perReplica: true,
    description: 'The route log; empty: route-observability.jsonl under state_dir. Relative paths resolve against the config file directory.',
  }),
  route_observability_slow_ms: doc(z.number().min(0).default(1000), {
    perReplica: true,
    description: 'With route observability on, a request slower than this logs a warning and is marked slow in the route log.',
  }),
  route_observability_memory_warn_rss_mib: doc(z.number().min(0).default(0), {
    perReplica: true,
    description: 'Resident memory above this is reported by /control/api/v1/observability/memory and, with route observability on, warned about per request; 0 disables.',
  }),
  operational_trace_enabled: doc(z.boolean().default(false), {
    perReplica: true,
    description:
      'Write the request and response payloads of command routes (every method but GET, on this process\'s control plane and worker gate) and of calls to worker gates to the trace file, one JSON line per exchange, secrets redacted (docs/operations.md#operational-trace). It captures raw payloads: keep disabled unless intended.',
  }),
  operational_trace_log_path: doc(text().default(''), {
    perReplica: true,
    description: 'Trace file (created mode 0600); empty: operational-trace.jsonl under state_dir. Relative paths resolve against the config file directory.',
  }),
  operational_trace_max_payload_bytes: doc(z.number().int().min(1024).default(16384), {
    perReplica: true,
    description: 'Each payload is cut to this many bytes of its serialized text; a cut one is marked "truncated": true with its whole size.',
  }),
  operational_trace_redact_prompt_text: doc(z.boolean().default(true), {
    perReplica: true,
    description: 'Replace every prompt_text value in the trace (the agent\'s prompt); false keeps prompts readable there.',
  }),
  otel_exporter_otlp_endpoint: doc(text().refine((v) => v === '' || isHttpUrl(v), HTTP_URL_REASON).default(''), {
    perReplica: true,
    description: 'OTLP/HTTP endpoint (a collector, e.g. http://127.0.0.1:4318) that traces of workflows and activities are sent to, at <endpoint>/v1/traces; empty: no tracing.',
    env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
  }),
};
