// OpenTelemetry set-up shared by the agents that use the plain Node SDK
// (vercel-ai, openinference, openai-agents): OTLP/HTTP protobuf to
// OTEL_EXPORTER_OTLP_ENDPOINT through a BatchSpanProcessor with a short delay,
// so one run's spans arrive in several export requests, and the undici
// instrumentation, which gives every fetch an HTTP client span and puts
// traceparent on it.
import { NodeSDK } from '@opentelemetry/sdk-node';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { resourceFromAttributes } from '@opentelemetry/resources';

export const SERVICE_NAME = 'billing-service';

export function undiciInstrumentation() {
  return new UndiciInstrumentation({
    headersToSpanAttributes: { requestHeaders: ['idempotency-key'] },
  });
}

export function startNodeSDK({ instrumentations = [] } = {}) {
  const sdk = new NodeSDK({
    resource: resourceFromAttributes({ 'service.name': SERVICE_NAME }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter(), { scheduledDelayMillis: 200 })],
    instrumentations: [undiciInstrumentation(), ...instrumentations],
  });
  sdk.start();
  return sdk;
}
