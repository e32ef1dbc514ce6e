// billing-agent instrumented with OpenLLMetry (@traceloop/node-server-sdk):
// the agent is withAgent, the tool withTool, the model calls are the OpenAI
// SDK's chat completions, which Traceloop's OpenAI instrumentation traces.
//
// Traceloop's withTool does not end a span whose promise rejects: the tool
// span of the failed first call is never exported, though the fetch's HTTP
// span inside it is. That is the real behaviour and the fixture keeps it.
import * as traceloop from '@traceloop/node-server-sdk';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import OpenAI from 'openai';
import { undiciInstrumentation, SERVICE_NAME } from '../lib/otel.mjs';
import { AGENT_NAME, INSTRUCTIONS, MODEL, PROMPT, TOOL_DESCRIPTION, TOOL_JSON_SCHEMA, TOOL_NAME, env, errorText, sendInvoiceEmail } from '../lib/tool.mjs';

traceloop.initialize({
  appName: SERVICE_NAME,
  baseUrl: env.otlpEndpoint, // Traceloop's OTLP/HTTP protobuf exporter posts to baseUrl + /v1/traces
  disableBatch: false, // its BatchSpanProcessor; OTEL_BSP_SCHEDULE_DELAY=200 sets the delay
  instrumentModules: { openAI: OpenAI }, // the OpenAI class, not the module
  traceloopSyncEnabled: false,
  silenceInitializationMessage: true,
});
registerInstrumentations({ instrumentations: [undiciInstrumentation()] });

const client = new OpenAI({ baseURL: env.openaiBaseURL, apiKey: env.apiKey });
const tools = [{ type: 'function', function: { name: TOOL_NAME, description: TOOL_DESCRIPTION, parameters: TOOL_JSON_SCHEMA } }];

async function billingAgent(prompt) {
  const messages = [
    { role: 'system', content: INSTRUCTIONS },
    { role: 'user', content: prompt },
  ];
  for (let turn = 0; turn < 5; turn++) {
    const completion = await client.chat.completions.create({ model: MODEL, messages, tools });
    const msg = completion.choices[0].message;
    messages.push(msg);
    if (!msg.tool_calls?.length) return msg.content;
    for (const call of msg.tool_calls) {
      let content;
      try {
        const args = JSON.parse(call.function.arguments);
        content = JSON.stringify(await traceloop.withTool({ name: call.function.name }, sendInvoiceEmail, args));
      } catch (err) {
        content = errorText(err);
      }
      messages.push({ role: 'tool', tool_call_id: call.id, content });
    }
  }
  throw new Error('billing-agent: too many turns');
}

const answer = await traceloop.withAgent({ name: AGENT_NAME }, billingAgent, PROMPT);
console.log(`openllmetry: ${answer}`);
await traceloop.forceFlush();
