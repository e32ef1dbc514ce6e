#!/usr/bin/env node
// billing-tools: an MCP server on the official TypeScript SDK with the three
// tools of issue 25's design, for the MCP fixtures.
//
//   node server.mjs --stdio [--mail URL] [--drop-answer TOOL]...
//   node server.mjs --http 127.0.0.1:PORT [--json-response] [--mail URL] [--drop-answer TOOL]...
//
//   send_invoice_email {to, invoice_id}  no annotations: sends an email, a new
//       message id per send. With --mail URL (or MAIL_URL) it POSTs
//       {to, subject, body} there (the oncetrace sandbox's /sandbox/mail/v1/send)
//       with the call's _meta idempotency key as Idempotency-Key, and answers
//       with the mail API's id; without, it only counts, and honours the key
//       itself.
//   get_invoice {invoice_id}             readOnlyHint: returns the invoice.
//   charge_card {amount, customer, idempotency_key?}  idempotentHint: the
//       same key (the argument, else the _meta key) returns the same charge
//       and charges once.
// Every tool answers structuredContent with an `id` (msg_…, the invoice's,
// ch_…), the effect id oncetrace's recording proxies read.
//
// --stdio: newline-delimited JSON-RPC on stdin/stdout; stdout carries
// nothing but the protocol, logs go to stderr; it exits when stdin ends.
// --http: Streamable HTTP on /mcp with stateful sessions (Mcp-Session-Id), an
// McpServer per session; SSE responses as the SDK sends them by default, with
// an in-memory event store so a client can resume a stream (Last-Event-ID),
// or plain JSON responses with --json-response. PORT 0 picks a free port; the
// first stdout line is {"url":"http://127.0.0.1:PORT/mcp"}.
//
// --drop-answer TOOL is for checking a client without a recording proxy: the
// first call of TOOL does its work and never answers (as a lost response,
// until the client cancels it).
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ANNOTATIONS, CHARGE_CARD, GET_INVOICE, INVOICES, META_KEY, SEND_INVOICE_EMAIL, SERVER_NAME, VERSION } from './billing.mjs';

const MAX_BODY_BYTES = 4 << 20;

function usage(msg) {
  console.error(`mcp-server: ${msg}\nusage: node server.mjs (--stdio | --http 127.0.0.1:PORT [--json-response]) [--mail URL] [--drop-answer TOOL]...`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { stdio: false, http: null, jsonResponse: false, mail: process.env.MAIL_URL || null, dropAnswer: new Set() };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    if (a === '--stdio') opts.stdio = true;
    else if (a === '--http') opts.http = value();
    else if (a === '--json-response') opts.jsonResponse = true;
    else if (a === '--mail') opts.mail = value();
    else if (a === '--drop-answer') opts.dropAnswer.add(value());
    else usage(`unknown argument ${a}`);
  }
  if (opts.stdio === Boolean(opts.http)) usage('give exactly one of --stdio and --http');
  if (opts.http) {
    const m = /^(127\.0\.0\.1|localhost):(\d+)$/.exec(opts.http);
    if (!m) usage(`--http ${opts.http}: want 127.0.0.1:PORT (loopback only)`);
    opts.host = m[1];
    opts.port = Number(m[2]);
  }
  if (opts.mail) new URL(opts.mail); // fail early on a bad URL
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const log = (msg) => process.stderr.write(`mcp-server: ${msg}\n`);
const newID = (prefix) => prefix + randomBytes(6).toString('hex');

// The server's state is the process's, shared by every HTTP session: a
// client that retries on a new session still meets its key.
const stats = { emails: 0, charges: 0, replays: 0 };
const emailKeys = new Map(); // key → {params, result: Promise}
const chargeKeys = new Map();
const dropped = new Set(); // tools whose first answer was withheld

// oncePerKey runs `perform` once per key: a second call with the key waits
// for and returns the first one's result, marked deduplicated; with other
// parameters it is refused, as Stripe refuses a reused key.
async function oncePerKey(keys, key, params, perform) {
  if (!key) return perform();
  const fingerprint = createHash('sha256').update(JSON.stringify(params)).digest('hex');
  const held = keys.get(key);
  if (held) {
    if (held.fingerprint !== fingerprint) throw new Error(`idempotency_error: key ${key} was used with other parameters`);
    stats.replays++;
    return { ...(await held.result), deduplicated: true };
  }
  const result = perform();
  keys.set(key, { fingerprint, result });
  result.catch(() => keys.delete(key)); // a failed call may be tried again
  return result;
}

// sendEmail sends through the mail API, which honours the key itself (the
// sandbox answers a repeated key from its key store), or only counts.
async function sendEmail({ to, invoice_id }, key) {
  if (!opts.mail) {
    stats.emails++;
    return { id: newID('msg_'), to, invoice_id, deduplicated: false };
  }
  const headers = { 'Content-Type': 'application/json' };
  if (key) headers['Idempotency-Key'] = key;
  const res = await fetch(opts.mail, {
    method: 'POST',
    headers,
    body: JSON.stringify({ to, subject: `Invoice ${invoice_id}`, body: `Invoice ${invoice_id} is attached.` }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`the mail API answered ${res.status}: ${text}`);
  const sent = JSON.parse(text);
  if (!sent.deduplicated) stats.emails++;
  return { id: typeof sent.id === 'string' ? sent.id : newID('msg_'), to, invoice_id, deduplicated: sent.deduplicated === true };
}

async function charge({ amount, customer }) {
  stats.charges++;
  return { id: newID('ch_'), amount, customer, status: 'succeeded', deduplicated: false };
}

// answer is a tool's result: the structured content and its JSON as text, as
// the SDK's examples give both to clients that read either.
function answer(structured) {
  return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured };
}

function failure(err) {
  return { content: [{ type: 'text', text: `Error: ${err.message}` }], isError: true };
}

// withheld makes the first call of a --drop-answer tool wait until the
// client cancels it, after its work is done; the SDK sends nothing for a
// cancelled request.
async function withheld(tool, extra) {
  if (!opts.dropAnswer.has(tool) || dropped.has(tool)) return;
  dropped.add(tool);
  log(`${tool}: withholding this answer (--drop-answer)`);
  await new Promise((resolve) => {
    if (extra.signal.aborted) resolve();
    extra.signal.addEventListener('abort', resolve, { once: true });
  });
}

function tool(name, handler) {
  return async (args, extra) => {
    const key = extra._meta?.[META_KEY];
    try {
      const structured = await handler(args, typeof key === 'string' ? key : undefined);
      log(`${name} ${JSON.stringify(args)}${key ? ` key=${key}` : ''} → ${structured.id}${structured.deduplicated ? ' (deduplicated)' : ''}`);
      await withheld(name, extra);
      return answer(structured);
    } catch (err) {
      log(`${name} ${JSON.stringify(args)}: ${err.message}`);
      return failure(err);
    }
  };
}

function newServer() {
  const server = new McpServer({ name: SERVER_NAME, version: VERSION });
  server.registerTool(SEND_INVOICE_EMAIL, {
    description: 'Email a customer their invoice.',
    inputSchema: { to: z.string().describe('Recipient email address'), invoice_id: z.string() },
    outputSchema: { id: z.string(), to: z.string(), invoice_id: z.string(), deduplicated: z.boolean() },
  }, tool(SEND_INVOICE_EMAIL, (args, key) => (opts.mail ? sendEmail(args, key) : oncePerKey(emailKeys, key, args, () => sendEmail(args)))));
  server.registerTool(GET_INVOICE, {
    description: 'Look up an invoice.',
    inputSchema: { invoice_id: z.string() },
    outputSchema: { id: z.string(), customer: z.string(), email: z.string(), amount: z.number(), currency: z.string(), status: z.string() },
    annotations: ANNOTATIONS[GET_INVOICE],
  }, tool(GET_INVOICE, async ({ invoice_id }) => {
    const invoice = INVOICES[invoice_id];
    if (!invoice) throw new Error(`no invoice ${invoice_id}`);
    return { ...invoice };
  }));
  server.registerTool(CHARGE_CARD, {
    description: "Charge a customer's card on file; a repeated idempotency key returns the first charge.",
    inputSchema: { amount: z.number().int().positive().describe('In cents'), customer: z.string(), idempotency_key: z.string().optional() },
    outputSchema: { id: z.string(), amount: z.number(), customer: z.string(), status: z.string(), deduplicated: z.boolean() },
    annotations: ANNOTATIONS[CHARGE_CARD],
  }, tool(CHARGE_CARD, ({ amount, customer, idempotency_key }, key) => oncePerKey(chargeKeys, idempotency_key ?? key, { amount, customer }, () => charge({ amount, customer }))));
  return server;
}

async function serveStdio() {
  const server = newServer();
  const transport = new StdioServerTransport();
  const stop = async () => {
    await server.close().catch(() => {});
    log(`stdio: done (${JSON.stringify(stats)})`);
    process.exit(0);
  };
  // The client closes stdin to end the server (the MCP stdio shutdown).
  process.stdin.on('end', stop);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  await server.connect(transport);
  log('stdio: ready');
}

function jsonRPCError(res, status, code, message) {
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null });
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function readJSON(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) req.destroy(new Error('request body too large'));
      else chunks.push(c);
    });
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (err) {
        reject(err);
      }
    });
    req.on('error', reject);
  });
}

async function serveHTTP() {
  const sessions = new Map(); // Mcp-Session-Id → transport
  const handle = async (req, res) => {
    if (new URL(req.url, 'http://host').pathname !== '/mcp') return jsonRPCError(res, 404, -32601, 'not found: the MCP endpoint is /mcp');
    const sessionID = req.headers['mcp-session-id'];
    if (sessionID) {
      const transport = sessions.get(sessionID);
      if (!transport) return jsonRPCError(res, 404, -32001, 'session not found');
      return transport.handleRequest(req, res);
    }
    // No session yet: only an initialize request opens one.
    if (req.method !== 'POST') return jsonRPCError(res, 400, -32000, 'bad request: no Mcp-Session-Id');
    let body;
    try {
      body = await readJSON(req);
    } catch (err) {
      return jsonRPCError(res, 400, -32700, `parse error: ${err.message}`);
    }
    if (!isInitializeRequest(body)) return jsonRPCError(res, 400, -32000, 'bad request: no Mcp-Session-Id and not an initialize request');
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      enableJsonResponse: opts.jsonResponse,
      eventStore: new InMemoryEventStore(),
      onsessioninitialized: (id) => {
        sessions.set(id, transport);
        log(`http: session ${id} opened`);
      },
      onsessionclosed: (id) => log(`http: session ${id} closed by the client`),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await newServer().connect(transport);
    await transport.handleRequest(req, res, body);
  };
  const httpServer = http.createServer((req, res) => {
    handle(req, res).catch((err) => {
      log(`http: ${req.method} ${req.url}: ${err.stack || err}`);
      if (!res.headersSent) jsonRPCError(res, 500, -32603, 'internal error');
      else res.destroy();
    });
  });
  await new Promise((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(opts.port, opts.host, resolve);
  });
  const url = `http://${opts.host}:${httpServer.address().port}/mcp`;
  process.stdout.write(JSON.stringify({ url }) + '\n');
  log(`http: listening on ${url}${opts.jsonResponse ? ' (JSON responses)' : ''}`);
  const stop = async () => {
    for (const t of sessions.values()) await t.close().catch(() => {});
    httpServer.closeAllConnections();
    httpServer.close();
    log(`http: done (${JSON.stringify(stats)})`);
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (opts.stdio) await serveStdio();
else await serveHTTP();
