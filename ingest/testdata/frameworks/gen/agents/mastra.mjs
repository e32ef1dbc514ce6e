// billing-agent on Mastra (@mastra/core Agent, model through @ai-sdk/openai:
// the Responses API), traced by Mastra's own observability
// (@mastra/observability) in one of its two documented OpenTelemetry set-ups,
// chosen by FIXTURE_MASTRA_OTEL:
//   exporter  @mastra/otel-exporter's OtelExporter ("custom" provider, OTLP
//             http/protobuf): Mastra's spans are converted and exported by a
//             processor of the exporter's own, beside the app's Node SDK,
//             which exports the undici HTTP spans.
//   bridge    @mastra/otel-bridge's OtelBridge: Mastra's spans are real OTel
//             spans of the app's Node SDK, made active while they run.
import { startNodeSDK, SERVICE_NAME } from '../lib/otel.mjs';
import { AGENT_NAME, INSTRUCTIONS, MODEL, PROMPT, TOOL_DESCRIPTION, TOOL_NAME, env, sendInvoiceEmail } from '../lib/tool.mjs';

const mode = process.env.FIXTURE_MASTRA_OTEL;
if (mode !== 'exporter' && mode !== 'bridge') throw new Error(`FIXTURE_MASTRA_OTEL=${mode}: want exporter or bridge`);

const sdk = startNodeSDK();
const { Mastra } = await import('@mastra/core/mastra');
const { Agent } = await import('@mastra/core/agent');
const { createTool } = await import('@mastra/core/tools');
const { Observability } = await import('@mastra/observability');
const { createOpenAI } = await import('@ai-sdk/openai');
const { z } = await import('zod');

let otel;
if (mode === 'exporter') {
  const { OtelExporter } = await import('@mastra/otel-exporter');
  otel = { exporters: [new OtelExporter({ provider: { custom: { endpoint: env.otlpEndpoint, protocol: 'http/protobuf' } } })] };
} else {
  const { OtelBridge } = await import('@mastra/otel-bridge');
  otel = { bridge: new OtelBridge() };
}

const openai = createOpenAI({ baseURL: env.openaiBaseURL, apiKey: env.apiKey });
const sendInvoice = createTool({
  id: TOOL_NAME,
  description: TOOL_DESCRIPTION,
  inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
  // Without an active OTel span (the exporter set-up), the key is scoped by
  // the Mastra trace id the tool is given.
  execute: (args, context) => sendInvoiceEmail(args, { keyScope: context?.tracingContext?.currentSpan?.traceId }),
});
const billingAgent = new Agent({
  id: AGENT_NAME,
  name: AGENT_NAME,
  instructions: INSTRUCTIONS,
  model: openai(MODEL),
  tools: { [TOOL_NAME]: sendInvoice },
});
const mastra = new Mastra({
  agents: { billingAgent },
  observability: new Observability({ configs: { otel: { serviceName: SERVICE_NAME, ...otel } } }),
});

try {
  const result = await mastra.getAgent('billingAgent').generate(PROMPT, { maxSteps: 5 });
  console.log(`mastra-${mode}: ${result.steps?.length} steps: ${result.text}`);
} finally {
  await mastra.shutdown?.();
  await sdk.shutdown();
}
