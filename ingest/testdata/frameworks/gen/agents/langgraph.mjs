// billing-agent on LangGraph.js (@langchain/langgraph's prebuilt ReAct agent,
// @langchain/openai's ChatOpenAI: Chat Completions), traced by
// @arizeai/openinference-instrumentation-langchain, which turns LangChain's
// callbacks into OpenInference spans (CHAIN / LLM / TOOL).
//
// FIXTURE_ROOT_SPAN=1 (framework langgraph-root) opens a span of the
// program's own, `billing-agent`, around the invocation. Without it
// (framework langgraph) the agent is written as a new user would write it;
// the instrumentation then creates its spans from callbacks without making
// them the active OTel context, so the fetches (model and mail) are not
// children of the LangChain spans: that is what the fixture records.
import { startNodeSDK } from '../lib/otel.mjs';
import { LangChainInstrumentation } from '@arizeai/openinference-instrumentation-langchain';
import * as CallbackManagerModule from '@langchain/core/callbacks/manager';
import { randomUUID } from 'node:crypto';
import { trace, SpanStatusCode } from '@opentelemetry/api';
import { AGENT_NAME, INSTRUCTIONS, MODEL, PROMPT, TOOL_DESCRIPTION, TOOL_NAME, env, sendInvoiceEmail } from '../lib/tool.mjs';

const sdk = startNodeSDK();
new LangChainInstrumentation().manuallyInstrument(CallbackManagerModule);

const { tool } = await import('@langchain/core/tools');
const { ChatOpenAI } = await import('@langchain/openai');
const { createReactAgent } = await import('@langchain/langgraph/prebuilt');
const { z } = await import('zod');

// Without an active OTel span (no root span of the program's own), the key
// is scoped by the LangGraph thread id the tool is given in its config.
const sendInvoice = tool((args, config) => sendInvoiceEmail(args, { keyScope: config?.configurable?.thread_id }), {
  name: TOOL_NAME,
  description: TOOL_DESCRIPTION,
  schema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
});

const agent = createReactAgent({
  llm: new ChatOpenAI({ model: MODEL, apiKey: env.apiKey, configuration: { baseURL: env.openaiBaseURL }, maxRetries: 0 }),
  tools: [sendInvoice],
  prompt: INSTRUCTIONS,
  name: AGENT_NAME,
});

const invoke = () => agent.invoke({ messages: [{ role: 'user', content: PROMPT }] }, { recursionLimit: 10, configurable: { thread_id: randomUUID() } });

try {
  let result;
  if (process.env.FIXTURE_ROOT_SPAN === '1') {
    result = await trace.getTracer('billing-service').startActiveSpan(AGENT_NAME, async (span) => {
      try {
        return await invoke();
      } catch (err) {
        span.recordException(err);
        span.setStatus({ code: SpanStatusCode.ERROR, message: String(err?.message ?? err) });
        throw err;
      } finally {
        span.end();
      }
    });
  } else {
    result = await invoke();
  }
  console.log(`langgraph: ${result.messages.length} messages: ${result.messages.at(-1).content}`);
} finally {
  await sdk.shutdown();
}
