#!/usr/bin/env node
// Checks server.mjs and client.mjs against each other with nothing in
// between (no oncetrace): over stdio and Streamable HTTP (SSE and JSON
// responses), in naive and keyed modes.
//
//   node agents/mcp/selfcheck.mjs
//
// - the agent loop: all three tools answer, one try each, the listed
//   annotations, keys only where keyed and only on tools not read-only,
//   one trace per run with a fresh span per call (--traceparent);
// - the tools through the SDK's own Client: get_invoice reads the same
//   invoice twice, charge_card's same key returns the same charge
//   (deduplicated), another key or none charges again, a reused key with
//   other parameters is refused; send_invoice_email's _meta key likewise;
// - the retry path, with the server withholding one answer (--drop-answer,
//   as a lost response): naive sends twice, keyed once;
// - --mail: the email is POSTed with the key as Idempotency-Key and the
//   mail API's id comes back;
// - HTTP: initialize answers SSE (JSON with --json-response) and an
//   Mcp-Session-Id.
// It runs one thing at a time and exits 1 on the first failure.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ANNOTATIONS, CHARGE_CARD, GET_INVOICE, INVOICES, INVOICE_ID, META_KEY, SEND_INVOICE_EMAIL, TOOLS } from './billing.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SERVER = path.join(HERE, 'server.mjs');
const CLIENT = path.join(HERE, 'client.mjs');
const children = new Set();

function run(args, { env = {} } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => { out += c; });
    child.stderr.on('data', (c) => { err += c; });
    child.on('error', reject);
    child.on('exit', (code) => {
      children.delete(child);
      resolve({ code, out, err });
    });
  });
}

// runClient runs client.mjs and returns its summary line, parsed.
async function runClient(args, expectCode = 0) {
  const { code, out, err } = await run([CLIENT, ...args]);
  const lines = out.trim().split('\n');
  assert.equal(lines.length, 1, `client ${args.join(' ')}: want one stdout line, got:\n${out}\nstderr:\n${err}`);
  assert.equal(code, expectCode, `client ${args.join(' ')}: exit ${code}\n${out}\n${err}`);
  return JSON.parse(lines[0]);
}

// startHTTPServer runs server.mjs --http on a free port and returns its URL.
async function startHTTPServer(extra = []) {
  const child = spawn(process.execPath, [SERVER, '--http', '127.0.0.1:0', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let log = '';
  child.stderr.on('data', (c) => { log += c; });
  const first = await new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout });
    rl.once('line', (l) => { rl.close(); resolve(l); });
    child.once('exit', (code) => reject(new Error(`server.mjs --http exited with ${code}:\n${log}`)));
  });
  const { url } = JSON.parse(first);
  const stop = () => new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', () => { children.delete(child); resolve(); });
    process.kill(child.pid, 'SIGTERM');
  });
  return { url, stop, log: () => log };
}

// startMailAPI is a stand-in for the sandbox mail API: it records each POST
// and honours Idempotency-Key as the sandbox does.
async function startMailAPI() {
  const requests = [];
  const byKey = new Map();
  let n = 0;
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const key = req.headers['idempotency-key'];
      requests.push({ path: req.url, contentType: req.headers['content-type'], key, body });
      let answer = key && byKey.get(key);
      if (answer) answer = { ...answer, deduplicated: true };
      else {
        answer = { id: `msg_mail${++n}`, object: 'email', status: 'sent', to: body.to, subject: body.subject, deduplicated: false };
        if (key) byKey.set(key, answer);
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/sandbox/mail/v1/send`, requests, close: () => new Promise((r) => server.close(r)) };
}

const results = (s) => s.results;
const callsOf = (s, tool) => s.calls.filter((c) => c.tool === tool);

function checkLoop(s, { transport, mode, traceparent }) {
  const label = `${transport}/${mode}`;
  assert.equal(s.ok, true, `${label}: not ok: ${JSON.stringify(s)}`);
  assert.equal(s.transport, transport.startsWith('http') ? 'http' : 'stdio');
  assert.equal(s.mode, mode);
  assert.equal(s.calls_made, 3, `${label}: calls_made`);
  assert.equal(s.timeouts, 0, `${label}: timeouts`);
  assert.deepEqual(s.calls.map((c) => [c.tool, c.try, c.outcome]), [[GET_INVOICE, 1, 'ok'], [SEND_INVOICE_EMAIL, 1, 'ok'], [CHARGE_CARD, 1, 'ok']], label);
  assert.deepEqual(Object.fromEntries(s.tools.map((t) => [t.name, t.annotations])), Object.fromEntries(TOOLS.map((n) => [n, ANNOTATIONS[n] ?? null])), `${label}: annotations`);
  assert.equal(s.server?.name, 'billing-tools');
  if (transport.startsWith('http')) assert.match(s.session_id ?? '', /^[0-9a-f-]{36}$/, `${label}: session id`);
  else assert.equal(s.session_id, null);
  assert.deepEqual(results(s)[GET_INVOICE], INVOICES[INVOICE_ID], `${label}: get_invoice`);
  assert.match(results(s)[SEND_INVOICE_EMAIL].id, /^msg_/, `${label}: email id`);
  assert.equal(results(s)[SEND_INVOICE_EMAIL].to, INVOICES[INVOICE_ID].email);
  const charge = results(s)[CHARGE_CARD];
  assert.match(charge.id, /^ch_/, `${label}: charge id`);
  assert.deepEqual([charge.amount, charge.customer, charge.deduplicated], [4200, 'cus_jordan', false]);
  const [inv, mail, card] = s.calls;
  assert.equal(inv._meta?.[META_KEY], undefined, `${label}: get_invoice is read-only and gets no key`);
  if (mode === 'keyed') {
    assert.match(mail._meta?.[META_KEY] ?? '', /^ik_[0-9a-f]{32}$/, `${label}: email key`);
    assert.match(card._meta?.[META_KEY] ?? '', /^ik_[0-9a-f]{32}$/, `${label}: charge key`);
    assert.equal(card.arguments.idempotency_key, card._meta[META_KEY], `${label}: charge_card's argument key`);
    assert.notEqual(mail._meta[META_KEY], card._meta[META_KEY]);
  } else {
    for (const c of s.calls) assert.equal(c._meta?.[META_KEY], undefined, `${label}: naive ${c.tool} has a key`);
    assert.equal(card.arguments.idempotency_key, undefined);
  }
  if (traceparent) {
    const tps = s.calls.map((c) => /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(c._meta?.traceparent ?? ''));
    assert.ok(tps.every(Boolean), `${label}: traceparents ${JSON.stringify(s.calls.map((c) => c._meta))}`);
    assert.ok(tps.every((m) => m[1] === s.trace_id), `${label}: one trace per run`);
    assert.equal(new Set(tps.map((m) => m[2])).size, 3, `${label}: a fresh span per call`);
  } else {
    for (const c of s.calls) assert.equal(c._meta?.traceparent, undefined);
  }
}

// checkRetry: the server withholds the first answer of `tool`; the client
// times out, calls again, and the second answer comes.
function checkRetry(s, { label, mode, tool }) {
  assert.equal(s.ok, true, `${label}: not ok: ${JSON.stringify(s)}`);
  assert.equal(s.calls_made, 4, `${label}: calls_made`);
  assert.equal(s.timeouts, 1, `${label}: timeouts`);
  const [first, second] = callsOf(s, tool);
  assert.deepEqual([first.try, first.outcome, second.try, second.outcome], [1, 'timeout', 2, 'ok'], label);
  assert.deepEqual(second.arguments, first.arguments, `${label}: the retry's arguments`);
  assert.equal(second._meta?.[META_KEY], first._meta?.[META_KEY], `${label}: the retry's key`);
  assert.equal(second.result.deduplicated, mode === 'keyed', `${label}: the retry deduplicated`);
}

// checkTools calls the tools through the SDK's own Client.
async function checkTools(label, transport) {
  const client = new Client({ name: 'selfcheck', version: '1.0.0' });
  await client.connect(transport);
  try {
    const call = async (name, args, meta) => {
      const r = await client.callTool({ name, arguments: args, ...(meta ? { _meta: meta } : {}) });
      return r.isError ? { error: r.content[0].text } : r.structuredContent;
    };
    const inv1 = await call(GET_INVOICE, { invoice_id: INVOICE_ID });
    const inv2 = await call(GET_INVOICE, { invoice_id: INVOICE_ID });
    assert.deepEqual(inv1, INVOICES[INVOICE_ID], `${label}: get_invoice`);
    assert.deepEqual(inv2, inv1, `${label}: get_invoice twice`);
    assert.match((await call(GET_INVOICE, { invoice_id: 'INV-404' })).error, /no invoice INV-404/, `${label}: unknown invoice`);

    const args = { amount: 1500, customer: 'cus_sam' };
    const a = await call(CHARGE_CARD, { ...args, idempotency_key: `ik_${label}_a` });
    const a2 = await call(CHARGE_CARD, { ...args, idempotency_key: `ik_${label}_a` });
    const b = await call(CHARGE_CARD, { ...args, idempotency_key: `ik_${label}_b` });
    const viaMeta = await call(CHARGE_CARD, args, { [META_KEY]: `ik_${label}_a` });
    const none1 = await call(CHARGE_CARD, args);
    const none2 = await call(CHARGE_CARD, args);
    const reused = await call(CHARGE_CARD, { amount: 9900, customer: 'cus_sam', idempotency_key: `ik_${label}_a` });
    assert.match(a.id, /^ch_/);
    assert.equal(a.deduplicated, false);
    assert.equal(a2.id, a.id, `${label}: the same key returns the same charge`);
    assert.equal(a2.deduplicated, true, `${label}: the same key charges once`);
    assert.notEqual(b.id, a.id, `${label}: another key charges again`);
    assert.equal(viaMeta.id, a.id, `${label}: the _meta key is honoured when there is no argument`);
    assert.notEqual(none1.id, none2.id, `${label}: no key charges every time`);
    assert.match(reused.error ?? '', /idempotency_error/, `${label}: a key reused with other parameters is refused`);

    const email = { to: 'sam@acme.dev', invoice_id: INVOICE_ID };
    const m1 = await call(SEND_INVOICE_EMAIL, email, { [META_KEY]: `ik_${label}_m` });
    const m2 = await call(SEND_INVOICE_EMAIL, email, { [META_KEY]: `ik_${label}_m` });
    const m3 = await call(SEND_INVOICE_EMAIL, email);
    assert.equal(m2.id, m1.id, `${label}: the same email key sends once`);
    assert.deepEqual([m1.deduplicated, m2.deduplicated], [false, true]);
    assert.notEqual(m3.id, m1.id, `${label}: no key sends again`);
  } finally {
    if (transport instanceof StreamableHTTPClientTransport) await transport.terminateSession();
    await client.close();
  }
}

// checkInitializeAnswer posts an initialize by hand and checks the kind of
// answer and the session header.
async function checkInitializeAnswer(url, want) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'selfcheck', version: '1.0.0' } } }),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.match(res.headers.get('content-type'), want === 'sse' ? /^text\/event-stream/ : /^application\/json/, `initialize answer ${text}`);
  assert.match(text, /"serverInfo":\{"name":"billing-tools"/);
  const session = res.headers.get('mcp-session-id');
  assert.ok(session, 'no Mcp-Session-Id');
  const del = await fetch(url, { method: 'DELETE', headers: { 'Mcp-Session-Id': session, 'MCP-Protocol-Version': '2025-06-18' } });
  assert.equal(del.status, 200, `DELETE: ${del.status}`);
  const after = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': session }, body: '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' });
  assert.equal(after.status, 404, 'a closed session is not found');
  await after.text();
}

async function step(name, fn) {
  const started = Date.now();
  await fn();
  console.log(`ok  ${name} (${Date.now() - started} ms)`);
}

async function main() {
  const stdioCmd = (extra = '') => `'${process.execPath}' '${SERVER}' --stdio${extra}`;
  for (const mode of ['naive', 'keyed']) {
    await step(`stdio ${mode}`, async () => {
      checkLoop(await runClient(['--stdio', stdioCmd(), '--mode', mode]), { transport: 'stdio', mode });
      checkLoop(await runClient(['--stdio', stdioCmd(), '--mode', mode, '--traceparent']), { transport: 'stdio', mode, traceparent: true });
    });
  }
  await step('stdio tools through the SDK client', () => checkTools('stdio', new StdioClientTransport({ command: process.execPath, args: [SERVER, '--stdio'], stderr: 'ignore' })));

  for (const [transport, extra, answer] of [['http', [], 'sse'], ['http-json', ['--json-response'], 'json']]) {
    const server = await startHTTPServer(extra);
    try {
      await step(`${transport} initialize answers ${answer} with a session`, () => checkInitializeAnswer(server.url, answer));
      for (const mode of ['naive', 'keyed']) {
        await step(`${transport} ${mode}`, async () => {
          checkLoop(await runClient(['--http', server.url, '--mode', mode]), { transport, mode });
          checkLoop(await runClient(['--http', server.url, '--mode', mode, '--traceparent']), { transport, mode, traceparent: true });
        });
      }
      await step(`${transport} tools through the SDK client`, () => checkTools(transport, new StreamableHTTPClientTransport(new URL(server.url))));
    } catch (err) {
      console.error(`server log:\n${server.log()}`);
      throw err;
    } finally {
      await server.stop();
    }
  }

  // The retry path: one answer withheld, the client's 500 ms timeout fires.
  for (const mode of ['naive', 'keyed']) {
    for (const tool of [SEND_INVOICE_EMAIL, CHARGE_CARD]) {
      await step(`stdio ${mode}, ${tool}'s first answer lost`, async () => {
        const s = await runClient(['--stdio', stdioCmd(` --drop-answer ${tool}`), '--mode', mode, '--timeout-ms', '500']);
        checkRetry(s, { label: `stdio/${mode}/${tool}`, mode, tool });
      });
      const server = await startHTTPServer(['--drop-answer', tool]);
      try {
        await step(`http ${mode}, ${tool}'s first answer lost`, async () => {
          const s = await runClient(['--http', server.url, '--mode', mode, '--timeout-ms', '500']);
          checkRetry(s, { label: `http/${mode}/${tool}`, mode, tool });
        });
      } finally {
        await server.stop();
      }
    }
  }

  // --mail: the server sends through the mail API, which honours the key.
  const mail = await startMailAPI();
  try {
    for (const mode of ['naive', 'keyed']) {
      await step(`stdio ${mode} with --mail, the email's answer lost`, async () => {
        mail.requests.length = 0;
        const s = await runClient(['--stdio', stdioCmd(` --mail ${mail.url} --drop-answer ${SEND_INVOICE_EMAIL}`), '--mode', mode, '--timeout-ms', '500']);
        checkRetry(s, { label: `mail/${mode}`, mode, tool: SEND_INVOICE_EMAIL });
        const [first, second] = callsOf(s, SEND_INVOICE_EMAIL);
        assert.equal(mail.requests.length, 2, 'two POSTs to the mail API');
        for (const r of mail.requests) {
          assert.equal(r.path, '/sandbox/mail/v1/send');
          assert.equal(r.contentType, 'application/json');
          assert.deepEqual(r.body, { to: 'jordan@acme.dev', subject: `Invoice ${INVOICE_ID}`, body: `Invoice ${INVOICE_ID} is attached.` });
          assert.equal(r.key, first._meta?.[META_KEY], 'the mail request carries the call\'s key');
        }
        assert.match(second.result.id, /^msg_mail\d+$/, "the mail API's id");
      });
    }
  } finally {
    await mail.close();
  }
  console.log('selfcheck: all passed');
}

try {
  await main();
} catch (err) {
  console.error(`selfcheck: ${err.stack || err}`);
  process.exitCode = 1;
} finally {
  for (const c of children) if (c.exitCode === null) process.kill(c.pid, 'SIGKILL');
}
