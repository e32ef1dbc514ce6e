// billing-agent instrumented the OpenInference way (Arize Phoenix): the
// OpenAI SDK's chat completions are traced by
// @arizeai/openinference-instrumentation-openai (LLM spans); the agent and
// the tool are an AGENT and a TOOL span made with
// @arizeai/openinference-core's traceAgent / traceTool.
import { startNodeSDK } from '../lib/otel.mjs';
import { OpenAIInstrumentation } from '@arizeai/openinference-instrumentation-openai';
import { traceAgent, traceTool } from '@arizeai/openinference-core';
import { SemanticConventions, MimeType } from '@arizeai/openinference-semantic-conventions';
import * as openaiModule from 'openai';
import { AGENT_NAME, INSTRUCTIONS, MODEL, PROMPT, TOOL_DESCRIPTION, TOOL_JSON_SCHEMA, TOOL_NAME, env, errorText, sendInvoiceEmail } from '../lib/tool.mjs';

const instrumentation = new OpenAIInstrumentation();
const sdk = startNodeSDK({ instrumentations: [instrumentation] });
instrumentation.manuallyInstrument(openaiModule); // ESM: the require hook never sees it
const OpenAI = openaiModule.OpenAI;

const client = new OpenAI({ baseURL: env.openaiBaseURL, apiKey: env.apiKey });
const tools = [{ type: 'function', function: { name: TOOL_NAME, description: TOOL_DESCRIPTION, parameters: TOOL_JSON_SCHEMA } }];

const sendTool = traceTool(sendInvoiceEmail, {
  name: TOOL_NAME,
  attributes: {
    [SemanticConventions.TOOL_NAME]: TOOL_NAME,
    [SemanticConventions.TOOL_DESCRIPTION]: TOOL_DESCRIPTION,
    [SemanticConventions.TOOL_PARAMETERS]: JSON.stringify(TOOL_JSON_SCHEMA),
  },
  processInput: (args) => ({
    [SemanticConventions.INPUT_VALUE]: JSON.stringify(args),
    [SemanticConventions.INPUT_MIME_TYPE]: MimeType.JSON,
  }),
});

const billingAgent = traceAgent(async (prompt) => {
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
        content = JSON.stringify(await sendTool(JSON.parse(call.function.arguments)));
      } catch (err) {
        content = errorText(err);
      }
      messages.push({ role: 'tool', tool_call_id: call.id, content });
    }
  }
  throw new Error('billing-agent: too many turns');
}, { name: AGENT_NAME, attributes: { [SemanticConventions.AGENT_NAME]: AGENT_NAME } });

try {
  console.log(`openinference: ${await billingAgent(PROMPT)}`);
} finally {
  await sdk.shutdown();
}
