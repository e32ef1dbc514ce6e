// A fake Gemini API server (generativelanguage.googleapis.com's REST shape)
// for the ADK fixture agent: POST /v1beta/models/{model}:generateContent,
// non-streaming, with usageMetadata. @google/genai is pointed at it with
// GOOGLE_GEMINI_BASE_URL.
//
// Its script is fake-openai.mjs's, counted in functionResponse parts:
//   0 → call send_invoice_email with the invoice arguments
//   1 → call it again with the SAME arguments
//   2 → answer with text.
// Like the real Gemini API it sends no function call ids (ADK makes its own,
// adk-<uuid>).
import http from 'node:http';
import { createHash } from 'node:crypto';
import { TOOL_ARGS, TOOL_NAME } from './tool.mjs';
import { FINAL_TEXT } from './fake-openai.mjs';

function hex(seed, n) {
  return createHash('sha256').update(seed).digest('hex').slice(0, n);
}

// startFakeGemini listens on 127.0.0.1 (a free port); label() names the
// current run, which makes the response ids deterministic per run.
export async function startFakeGemini({ label }) {
  const calls = []; // {at_ms, api, toolResults}
  const server = http.createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    let body;
    try {
      body = JSON.parse(raw || '{}');
    } catch {
      return send(res, 400, { error: { code: 400, message: 'body is not JSON', status: 'INVALID_ARGUMENT' } });
    }
    const path = new URL(req.url, 'http://x').pathname;
    const m = /^\/v1beta\/models\/([^/:]+):generateContent$/.exec(path);
    if (req.method !== 'POST' || !m) {
      const message = /:streamGenerateContent$/.test(path) ? 'fake Gemini: streaming is not supported' : `fake Gemini: no route ${req.method} ${path}`;
      return send(res, 404, { error: { code: 404, message, status: 'NOT_FOUND' } });
    }
    const toolResults = (body.contents || []).flatMap((c) => c.parts || []).filter((p) => p.functionResponse).length;
    calls.push({ at_ms: Date.now(), api: 'gemini.generateContent', toolResults });
    const model = decodeURIComponent(m[1]);
    const parts = toolResults < 2
      ? [{ functionCall: { name: TOOL_NAME, args: { ...TOOL_ARGS } } }]
      : [{ text: FINAL_TEXT }];
    const usage = { input: 120 + 40 * toolResults, output: toolResults >= 2 ? 16 : 28 };
    send(res, 200, {
      candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
      usageMetadata: {
        promptTokenCount: usage.input,
        candidatesTokenCount: usage.output,
        totalTokenCount: usage.input + usage.output,
        promptTokensDetails: [{ modality: 'TEXT', tokenCount: usage.input }],
      },
      modelVersion: model,
      responseId: hex(`${label()}/${toolResults}`, 22),
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    calls,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

function send(res, status, obj) {
  const b = JSON.stringify(obj);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=UTF-8', 'Content-Length': Buffer.byteLength(b) });
  res.end(b);
}
