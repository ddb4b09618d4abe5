import { createRequire } from 'node:module';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry';
import { SERVICE_NAME } from '../service-name.ts';

/**
 * OpenTelemetry tracing of workflows and activities (docs/http.md#request-ids, tracing), on when an OTLP endpoint is
 * configured: the SDK's plugin traces the client's starts and signals, every workflow (its spans leave the workflow
 * through a sink) and every activity, and sends them over OTLP/HTTP to `<endpoint>/v1/traces`.
 */

/** The plugin's workflow interceptors, bundled with the workflows when tracing is on. */
export const TRACING_WORKFLOW_INTERCEPTORS = createRequire(import.meta.url).resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

export interface Tracing {
  plugin: OpenTelemetryPlugin;
  /** Sends what is still buffered and stops. */
  shutdown(): Promise<void>;
}

export function startTracing(endpoint: string): Tracing {
  const spanProcessor = new BatchSpanProcessor(new OTLPTraceExporter({ url: `${endpoint.replace(/\/$/, '')}/v1/traces` }));
  const resource = new Resource({ 'service.name': SERVICE_NAME });
  const provider = new BasicTracerProvider({ resource, spanProcessors: [spanProcessor] });
  const plugin = new OpenTelemetryPlugin({ resource, spanProcessor, tracer: provider.getTracer(SERVICE_NAME) });
  return { plugin, shutdown: () => provider.shutdown() };
}
