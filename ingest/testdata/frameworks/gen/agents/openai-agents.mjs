// billing-agent on the OpenAI Agents SDK (@openai/agents, Responses API).
// The SDK has no OpenTelemetry export of its own: its tracing goes through
// the small bridge in ../lib/agents-otel-bridge.mjs, which replaces the
// default processor (that would post to OpenAI).
import { startNodeSDK } from '../lib/otel.mjs';
import { trace } from '@opentelemetry/api';
import { Agent, run, tool, setTraceProcessors, setTracingDisabled, setDefaultOpenAIClient, setOpenAIAPI, getGlobalTraceProvider } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { OTelBridgeProcessor } from '../lib/agents-otel-bridge.mjs';
import { AGENT_NAME, INSTRUCTIONS, MODEL, PROMPT, TOOL_DESCRIPTION, TOOL_NAME, env, sendInvoiceEmail } from '../lib/tool.mjs';

const sdk = startNodeSDK();
const bridge = new OTelBridgeProcessor(trace.getTracer('openai-agents-otel-bridge', '0.1.0'));
setTraceProcessors([bridge]);
setTracingDisabled(false);
setDefaultOpenAIClient(new OpenAI({ baseURL: env.openaiBaseURL, apiKey: env.apiKey, fetch: bridge.bind((url, init) => fetch(url, init)) }));
setOpenAIAPI('responses');

const agent = new Agent({
  name: AGENT_NAME,
  instructions: INSTRUCTIONS,
  model: MODEL,
  tools: [
    tool({
      name: TOOL_NAME,
      description: TOOL_DESCRIPTION,
      parameters: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
      execute: bridge.tool((args) => sendInvoiceEmail(args)),
    }),
  ],
});

try {
  const result = await run(agent, PROMPT, { maxTurns: 5 });
  console.log(`openai-agents: ${result.finalOutput}`);
} finally {
  await getGlobalTraceProvider().forceFlush();
  await sdk.shutdown();
}
