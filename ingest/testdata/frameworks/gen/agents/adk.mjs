// billing-agent on Google's Agent Development Kit for JS (@google/adk, an
// LlmAgent with a FunctionTool, run by an InMemoryRunner), its model Gemini
// through @google/genai, pointed at the harness's fake Gemini server with
// GOOGLE_GEMINI_BASE_URL. ADK makes its OTel spans itself (tracer
// gcp.vertex.agent) through the global tracer provider the Node SDK
// registers. ADK pins @opentelemetry/api to exactly 1.9.0; npm nests that
// copy under node_modules/@google/adk, so ADK gets 1.9.0 while the app keeps
// 1.9.1, and both reach the same global provider. No overrides needed.
import { startNodeSDK } from '../lib/otel.mjs';
import { AGENT_NAME, INSTRUCTIONS, PROMPT, TOOL_DESCRIPTION, TOOL_NAME, sendInvoiceEmail } from '../lib/tool.mjs';

const sdk = startNodeSDK();
const { LlmAgent, FunctionTool, InMemoryRunner, Gemini } = await import('@google/adk');
const { z } = await import('zod');

const GEMINI_MODEL = 'gemini-2.5-flash';

const sendInvoice = new FunctionTool({
  name: TOOL_NAME,
  description: TOOL_DESCRIPTION,
  parameters: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
  execute: (args) => sendInvoiceEmail(args),
});
const agent = new LlmAgent({
  name: AGENT_NAME,
  description: 'Sends invoices by email.',
  model: new Gemini({ model: GEMINI_MODEL, apiKey: process.env.GOOGLE_GENAI_API_KEY }),
  instruction: INSTRUCTIONS,
  tools: [sendInvoice],
});

try {
  const runner = new InMemoryRunner({ agent, appName: AGENT_NAME });
  let text = '';
  for await (const event of runner.runEphemeral({ userId: 'fixture-user', newMessage: { role: 'user', parts: [{ text: PROMPT }] } })) {
    for (const p of event.content?.parts ?? []) if (p.text) text += p.text;
  }
  console.log(`adk: ${text}`);
} finally {
  await sdk.shutdown();
}
