// billing-agent on the Vercel AI SDK (ai 6, @ai-sdk/openai 3: the Responses
// API), with the SDK's own OpenTelemetry spans (experimental_telemetry).
import { startNodeSDK } from '../lib/otel.mjs';
import { AGENT_NAME, INSTRUCTIONS, MODEL, PROMPT, TOOL_DESCRIPTION, TOOL_NAME, env, sendInvoiceEmail } from '../lib/tool.mjs';

const sdk = startNodeSDK();
const { ToolLoopAgent, tool, stepCountIs } = await import('ai');
const { createOpenAI } = await import('@ai-sdk/openai');
const { z } = await import('zod');

const openai = createOpenAI({ baseURL: env.openaiBaseURL, apiKey: env.apiKey });
const agent = new ToolLoopAgent({
  id: AGENT_NAME,
  model: openai(MODEL),
  instructions: INSTRUCTIONS,
  tools: {
    [TOOL_NAME]: tool({
      description: TOOL_DESCRIPTION,
      inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
      execute: (args) => sendInvoiceEmail(args),
    }),
  },
  stopWhen: stepCountIs(5),
  experimental_telemetry: { isEnabled: true, functionId: AGENT_NAME },
});

try {
  const result = await agent.generate({ prompt: PROMPT });
  console.log(`vercel-ai: ${result.steps.length} steps: ${result.text}`);
} finally {
  await sdk.shutdown();
}
