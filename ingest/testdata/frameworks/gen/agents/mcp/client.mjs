#!/usr/bin/env node
// billing-agent as an MCP client agent loop on the official TypeScript SDK,
// for the MCP fixtures (issue 25's design): initialize, tools/list, then
// get_invoice, send_invoice_email and charge_card, each retried once with the
// same arguments when its own timeout fires.
//
//   node client.mjs (--stdio 'CMD ARGS' | --http URL) [--mode naive|keyed]
//                   [--timeout-ms 2000] [--fault-on TOOL=FAULT]... [--traceparent]
//
// --stdio launches CMD (split like a shell would, with quotes; no
// expansions) with this process's environment and speaks to it on its
// stdin/stdout; its stderr passes through to ours. --http speaks Streamable
// HTTP to URL and ends its session with DELETE when done.
//
// --mode keyed gives every call of a tool not annotated readOnlyHint an
// idempotency key in params._meta["io.oncetrace/idempotency-key"], the same on
// both tries (lib/tool.mjs's key: the run's trace id, the tool and its
// arguments), and charge_card also as its idempotency_key argument. naive
// (the default) sends no key.
// --fault-on TOOL=FAULT puts params._meta["io.oncetrace/fault"] = FAULT on the
// first try of TOOL, for the recording proxy to apply (lose-response,
// fail-before, latency).
// --traceparent puts a W3C traceparent in params._meta.traceparent
// (SEP-414): one trace per run, a fresh span id per tools/call request.
//
// It prints one JSON line on stdout when done, the summary: the tools listed,
// every tools/call try with its outcome (ok, error, timeout), the number of
// calls and timeouts, each tool's final structuredContent; it exits 0 when
// all three tools answered without error, 1 otherwise.
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { idempotencyKey } from '../../lib/tool.mjs';
import { CHARGE_CARD, CLIENT_NAME, GET_INVOICE, INVOICE_ID, META_FAULT, META_KEY, SEND_INVOICE_EMAIL, TOOLS, VERSION } from './billing.mjs';

function usage(msg) {
  console.error(`mcp-client: ${msg}\nusage: node client.mjs (--stdio 'CMD ARGS' | --http URL) [--mode naive|keyed] [--timeout-ms 2000] [--fault-on TOOL=FAULT]... [--traceparent]`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { stdio: null, http: null, mode: 'naive', timeoutMs: 2000, faults: new Map(), traceparent: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    if (a === '--stdio') opts.stdio = value();
    else if (a === '--http') opts.http = value();
    else if (a === '--mode') opts.mode = value();
    else if (a === '--timeout-ms') opts.timeoutMs = Number(value());
    else if (a === '--traceparent') opts.traceparent = true;
    else if (a === '--fault-on') {
      const m = /^([^=]+)=(.+)$/.exec(value());
      if (!m) usage('--fault-on wants TOOL=FAULT');
      opts.faults.set(m[1], m[2]);
    } else usage(`unknown argument ${a}`);
  }
  if (Boolean(opts.stdio) === Boolean(opts.http)) usage('give exactly one of --stdio and --http');
  if (!['naive', 'keyed'].includes(opts.mode)) usage(`--mode ${opts.mode}: want naive or keyed`);
  if (!(opts.timeoutMs > 0)) usage('--timeout-ms wants a positive number');
  for (const tool of opts.faults.keys()) if (!TOOLS.includes(tool)) usage(`--fault-on ${tool}: no such tool (${TOOLS.join(', ')})`);
  return opts;
}

// splitCommand splits a command line into words as a POSIX shell does for
// quoting ('…', "…", backslash), without any expansion.
function splitCommand(line) {
  const words = [];
  let word = null;
  let quote = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === '\\' && i + 1 < line.length && '"\\$`'.includes(line[i + 1])) word += line[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= '';
    } else if (c === '\\' && i + 1 < line.length) {
      word = (word ?? '') + line[++i];
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else {
      word = (word ?? '') + c;
    }
  }
  if (quote) throw new Error(`mcp-client: unterminated ${quote} in --stdio ${line}`);
  if (word !== null) words.push(word);
  return words;
}

const SETUP_TIMEOUT_MS = 30_000;
const hex = (bytes) => randomBytes(bytes).toString('hex');

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  // The run's trace: its traceparents, and the scope of its keys, so that a
  // key is stable across the tries of one intent and new on the next run.
  const traceId = hex(16);
  const summary = {
    client: CLIENT_NAME,
    transport: opts.stdio ? 'stdio' : 'http',
    mode: opts.mode,
    trace_id: traceId,
    session_id: null,
    server: null,
    tools: [],
    calls: [],
    calls_made: 0,
    timeouts: 0,
    results: {},
    ok: false,
  };
  let transport;
  if (opts.stdio) {
    const [command, ...args] = splitCommand(opts.stdio);
    if (!command) usage('--stdio wants a command');
    // The whole environment, not the SDK's short default list: the server
    // (or oncetrace mcp-stdio around it) reads MAIL_URL and its own settings.
    transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
  } else {
    transport = new StreamableHTTPClientTransport(new URL(opts.http));
  }
  const client = new Client({ name: CLIENT_NAME, version: VERSION });
  const timeout = { timeout: opts.timeoutMs };
  // initialize and tools/list wait longer: a stdio server is still starting.
  const setupTimeout = { timeout: Math.max(opts.timeoutMs, SETUP_TIMEOUT_MS) };
  const readOnly = new Set();

  // callTool makes one tools/call and, when its timeout fires, one more with
  // the same arguments (and, keyed, the same key). It returns the tool's
  // structuredContent, or null when the tool failed.
  const callTool = async (name, args) => {
    const key = opts.mode === 'keyed' && !readOnly.has(name) ? idempotencyKey(traceId, name, args) : undefined;
    const toolArgs = key && name === CHARGE_CARD ? { ...args, idempotency_key: key } : args;
    for (let attempt = 1; attempt <= 2; attempt++) {
      const meta = {};
      if (key) meta[META_KEY] = key;
      if (attempt === 1 && opts.faults.has(name)) meta[META_FAULT] = opts.faults.get(name);
      if (opts.traceparent) meta.traceparent = `00-${traceId}-${hex(8)}-01`;
      const params = { name, arguments: toolArgs, ...(Object.keys(meta).length > 0 ? { _meta: meta } : {}) };
      const call = { tool: name, try: attempt, arguments: toolArgs, _meta: params._meta ?? null, outcome: null, ms: 0 };
      summary.calls.push(call);
      summary.calls_made++;
      const started = Date.now();
      try {
        const result = await client.callTool(params, undefined, timeout);
        call.ms = Date.now() - started;
        if (result.isError) {
          call.outcome = 'error';
          call.error = result.content?.map((c) => c.text ?? '').join('\n') ?? 'isError';
          return null;
        }
        call.outcome = 'ok';
        call.result = result.structuredContent ?? null;
        return call.result;
      } catch (err) {
        call.ms = Date.now() - started;
        if (err?.code === ErrorCode.RequestTimeout) {
          call.outcome = 'timeout';
          summary.timeouts++;
          process.stderr.write(`mcp-client: ${name} try ${attempt} timed out after ${opts.timeoutMs} ms${attempt === 1 ? '; calling it again' : ''}\n`);
          continue;
        }
        call.outcome = 'error';
        call.error = err?.message ?? String(err);
        return null;
      }
    }
    return null;
  };

  try {
    await client.connect(transport, setupTimeout);
    summary.server = client.getServerVersion() ?? null;
    summary.session_id = transport.sessionId ?? null;
    const { tools } = await client.listTools(undefined, setupTimeout);
    summary.tools = tools.map((t) => ({ name: t.name, annotations: t.annotations ?? null }));
    for (const t of tools) if (t.annotations?.readOnlyHint) readOnly.add(t.name);
    const missing = TOOLS.filter((n) => !tools.some((t) => t.name === n));
    if (missing.length > 0) throw new Error(`the server does not list ${missing.join(', ')}`);

    const invoice = (summary.results[GET_INVOICE] = await callTool(GET_INVOICE, { invoice_id: INVOICE_ID }));
    if (invoice) {
      summary.results[SEND_INVOICE_EMAIL] = await callTool(SEND_INVOICE_EMAIL, { to: invoice.email, invoice_id: invoice.id });
      summary.results[CHARGE_CARD] = await callTool(CHARGE_CARD, { amount: invoice.amount, customer: invoice.customer });
    }
    summary.ok = TOOLS.every((n) => summary.results[n]);
  } catch (err) {
    summary.error = err?.message ?? String(err);
  } finally {
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
      await transport.terminateSession().catch((err) => process.stderr.write(`mcp-client: ending the session: ${err.message}\n`));
    }
    await client.close().catch(() => {});
  }
  process.stdout.write(JSON.stringify(summary) + '\n');
  process.exitCode = summary.ok ? 0 : 1;
}

await main();
