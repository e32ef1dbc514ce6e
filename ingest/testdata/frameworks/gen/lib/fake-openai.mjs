// A fake OpenAI-compatible model server for the fixture agents: POST
// /v1/chat/completions and POST /v1/responses, non-streaming, with usage.
//
// Its script depends only on how many tool results the conversation holds:
//   0 → call send_invoice_email with the invoice arguments (call id A)
//   1 → call it again with the SAME arguments and a NEW call id B
//   2 → answer with text.
import http from 'node:http';
import { createHash } from 'node:crypto';
import { TOOL_ARGS, TOOL_NAME } from './tool.mjs';

export const FINAL_TEXT = 'I sent the June invoice INV-0612 to jordan@acme.dev.';
const ARGS_JSON = JSON.stringify(TOOL_ARGS);

function hex(seed, n) {
  return createHash('sha256').update(seed).digest('hex').slice(0, n);
}

// startFakeOpenAI listens on 127.0.0.1 (a free port). label() names the
// current run, which makes the ids deterministic per run.
export async function startFakeOpenAI({ label }) {
  const calls = []; // {at_ms, api, path, toolResults, stream}
  const server = http.createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    let body;
    try {
      body = JSON.parse(raw || '{}');
    } catch {
      return send(res, 400, { error: { message: 'body is not JSON', type: 'invalid_request_error' } });
    }
    const path = new URL(req.url, 'http://x').pathname;
    if (req.method !== 'POST' || (path !== '/v1/chat/completions' && path !== '/v1/responses')) {
      return send(res, 404, { error: { message: `fake OpenAI: no route ${req.method} ${path}`, type: 'invalid_request_error' } });
    }
    if (body.stream) {
      return send(res, 400, { error: { message: 'fake OpenAI: streaming is not supported', type: 'invalid_request_error' } });
    }
    const chat = path === '/v1/chat/completions';
    const toolResults = chat
      ? (body.messages || []).filter((m) => m.role === 'tool').length
      : (Array.isArray(body.input) ? body.input : []).filter((i) => i.type === 'function_call_output').length;
    calls.push({ at_ms: Date.now(), api: chat ? 'chat.completions' : 'responses', toolResults });
    const seed = `${label()}/${toolResults}`;
    const model = body.model || 'gpt-4o-mini';
    const usage = { input: 120 + 40 * toolResults, output: toolResults >= 2 ? 16 : 28 };
    const toolCall = toolResults < 2 ? { id: `call_${toolResults === 0 ? 'A' : 'B'}${hex(label() + toolResults, 22)}` } : null;
    send(res, 200, chat ? chatCompletion(seed, model, toolCall, usage) : response(seed, model, toolCall, usage));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/v1`,
    calls,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

function send(res, status, obj) {
  const b = JSON.stringify(obj);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(b),
    'x-request-id': 'req_' + hex(b, 24),
  });
  res.end(b);
}

function chatCompletion(seed, model, toolCall, usage) {
  const message = toolCall
    ? { role: 'assistant', content: null, refusal: null, tool_calls: [{ id: toolCall.id, type: 'function', function: { name: TOOL_NAME, arguments: ARGS_JSON } }] }
    : { role: 'assistant', content: FINAL_TEXT, refusal: null };
  return {
    id: 'chatcmpl-' + hex(seed, 24),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: toolCall ? 'tool_calls' : 'stop' }],
    usage: {
      prompt_tokens: usage.input,
      completion_tokens: usage.output,
      total_tokens: usage.input + usage.output,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    },
    system_fingerprint: 'fp_fixture',
  };
}

function response(seed, model, toolCall, usage) {
  const output = toolCall
    ? [{ type: 'function_call', id: 'fc_' + hex(seed, 24), call_id: toolCall.id, name: TOOL_NAME, arguments: ARGS_JSON, status: 'completed' }]
    : [{ type: 'message', id: 'msg_' + hex(seed, 24), status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: FINAL_TEXT, annotations: [], logprobs: [] }] }];
  return {
    id: 'resp_' + hex(seed, 24),
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'completed',
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model,
    output,
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    service_tier: 'default',
    store: false,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: {
      input_tokens: usage.input,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: usage.output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.input + usage.output,
    },
    user: null,
    metadata: {},
  };
}
