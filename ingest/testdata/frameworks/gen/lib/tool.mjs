// The one tool every fixture agent has: send_invoice_email, which POSTs to the
// oncetrace sandbox mail API (through the harness's recording proxy).
//
// Its first call asks the sandbox to lose the response (the email is
// delivered, the answer never comes) and gives up after 1 s, so fetch throws
// a TimeoutError and the tool throws. The framework reports that to the model,
// which calls the tool again with the same arguments; that call succeeds. In
// the keyed run both calls carry the same Idempotency-Key, so the sandbox
// answers the retry from its key store instead of sending a second email.
//
// Nothing here adds oncetrace.* attributes: the fixtures record what the
// frameworks export on their own.
import { createHash } from 'node:crypto';
import { trace } from '@opentelemetry/api';

export const AGENT_NAME = 'billing-agent';
export const TOOL_NAME = 'send_invoice_email';
export const TOOL_DESCRIPTION = 'Send an invoice email to a customer.';
export const TOOL_ARGS = Object.freeze({
  to: 'jordan@acme.dev',
  subject: 'Your June invoice',
  body: 'Invoice INV-0612 is attached.',
});
export const TOOL_JSON_SCHEMA = Object.freeze({
  type: 'object',
  properties: {
    to: { type: 'string', description: 'Recipient email address' },
    subject: { type: 'string' },
    body: { type: 'string' },
  },
  required: ['to', 'subject', 'body'],
  additionalProperties: false,
});
export const INSTRUCTIONS = 'You are billing-agent. Send invoices by email with send_invoice_email.';
export const PROMPT = 'Email Jordan (jordan@acme.dev) the June invoice INV-0612.';
export const MODEL = 'gpt-4o-mini';

// env is what run.mjs passes to an agent (read when used, so that run.mjs
// itself can import the constants above).
export const env = {
  get openaiBaseURL() { return must('FIXTURE_OPENAI_BASE_URL'); }, // ends in /v1
  get mailURL() { return must('FIXTURE_MAIL_URL'); },
  get run() { return must('FIXTURE_RUN'); }, // naive | keyed
  get otlpEndpoint() { return must('OTEL_EXPORTER_OTLP_ENDPOINT'); },
  get apiKey() { return process.env.OPENAI_API_KEY || 'sk-fixture-not-a-real-key'; },
};

function must(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through run.mjs`);
  return v;
}

// canonicalJSON is JSON with object keys sorted at every level.
export function canonicalJSON(v) {
  if (Array.isArray(v)) return '[' + v.map(canonicalJSON).join(',') + ']';
  if (v && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canonicalJSON(v[k])).join(',') + '}';
  }
  return JSON.stringify(v);
}

// idempotencyKey derives the key from the execution (its trace id), the tool
// and its arguments, so a retry of the same call sends the same key.
export function idempotencyKey(traceId, toolName, args) {
  const h = createHash('sha256').update(`${traceId}\n${toolName}\n${canonicalJSON(args)}`).digest('hex');
  return 'ik_' + h.slice(0, 32);
}

let calls = 0;

// sendInvoiceEmail is the tool's code. It runs inside the framework's tool
// span, so the fetch's HTTP client span (and the traceparent it sends) is a
// child of that span.
//
// keyScope stands in for the trace id when the framework runs the tool with
// no active OTel span (LangGraph without a root span of the program's own,
// Mastra with its OtelExporter): the id of the framework's own run or trace
// that the tool is given, the same for both calls of one run.
export async function sendInvoiceEmail(args, { keyScope } = {}) {
  calls++;
  const first = calls === 1;
  const msg = { to: args.to, subject: args.subject, body: args.body };
  const headers = { 'Content-Type': 'application/json' };
  if (env.run === 'keyed') {
    const traceId = trace.getActiveSpan()?.spanContext().traceId ?? keyScope;
    if (!traceId) throw new Error('keyed run: no active span inside the tool, and no key scope');
    headers['Idempotency-Key'] = idempotencyKey(traceId, TOOL_NAME, msg);
  }
  if (first) headers['X-Oncetrace-Fault'] = 'lose-response';
  const res = await fetch(`${env.mailURL}/sandbox/mail/v1/send`, {
    method: 'POST',
    headers,
    body: JSON.stringify(msg),
    signal: AbortSignal.timeout(first ? 1000 : 10000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`mail API answered ${res.status}: ${text}`);
  return JSON.parse(text);
}

// errorText is how the hand-written agent loops report a tool error to the model.
export function errorText(err) {
  return `Error: ${err?.name ?? 'Error'}: ${err?.message ?? String(err)}`;
}
