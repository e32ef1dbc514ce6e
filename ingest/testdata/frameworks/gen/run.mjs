#!/usr/bin/env node
// Fixture generator: runs billing-agent on four real agent frameworks and
// records exactly what each sends, for ingest's Go tests to replay without
// Node.
//
//   node run.mjs --oncetrace BIN --out DIR [--only FRAMEWORK[/RUN]]...
//
// It starts a real `oncetrace serve` (whose sandbox mail API the tool calls),
// an OTLP recorder, a recording proxy in front of the sandbox and a fake
// OpenAI server, then runs each framework's agent twice (naive, keyed), each
// in a child process of its own, and writes DIR/<framework>/<run>/:
//   otlp-001.pb …   each OTLP export request body, byte for byte
//   requests.jsonl  OTLP and mail requests in arrival order
//   manifest.json   what ran, with which package versions
// It checks each run's invariants (see checkRun) and fails when one breaks;
// it writes nothing unless every selected run passed.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFakeOpenAI } from './lib/fake-openai.mjs';
import { decodeTraces, SPAN_KIND } from './lib/otlp-decode.mjs';
import { AGENT_NAME, TOOL_NAME, TOOL_ARGS } from './lib/tool.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const RUNS = ['naive', 'keyed'];
// packages: what the manifest reports, as installed for that agent (looked
// up first under `nested`, the framework's own node_modules, then at the top).
const OTEL = ['@opentelemetry/api', '@opentelemetry/sdk-node', '@opentelemetry/exporter-trace-otlp-proto', '@opentelemetry/instrumentation-undici'];
const FRAMEWORKS = {
  'vercel-ai': {
    script: 'agents/vercel-ai.mjs',
    packages: ['ai', '@ai-sdk/openai', 'zod', ...OTEL],
  },
  openllmetry: {
    script: 'agents/openllmetry.mjs',
    // Traceloop brings its own Node SDK and OTLP exporter (0.203.x) and uses them.
    nested: ['@traceloop/node-server-sdk'],
    packages: ['@traceloop/node-server-sdk', '@traceloop/instrumentation-openai', 'openai', ...OTEL],
  },
  openinference: {
    script: 'agents/openinference.mjs',
    packages: ['@arizeai/openinference-instrumentation-openai', '@arizeai/openinference-core', '@arizeai/openinference-semantic-conventions', 'openai', ...OTEL],
  },
  'openai-agents': {
    script: 'agents/openai-agents.mjs',
    // openai: the client the agent is given (the SDK's own nested openai 7 is not used for requests).
    packages: ['@openai/agents', '@openai/agents-core', '@openai/agents-openai', 'openai', 'zod', ...OTEL],
  },
};
const RUN_TIMEOUT_MS = 60_000;

function parseArgs(argv) {
  const o = { only: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--oncetrace') o.oncetrace = path.resolve(val());
    else if (a === '--out') o.out = path.resolve(val());
    else if (a === '--only') o.only.push(val());
    else throw new Error(`unknown argument ${a}; usage: node run.mjs --oncetrace BIN --out DIR [--only FRAMEWORK[/RUN]]`);
  }
  if (!o.oncetrace || !o.out) throw new Error('usage: node run.mjs --oncetrace BIN --out DIR [--only FRAMEWORK[/RUN]]');
  return o;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Children still running when the harness is interrupted are killed by pid.
const children = new Set();
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    for (const pid of children) {
      try { process.kill(pid, 'SIGKILL'); } catch {}
    }
    process.exit(130);
  });
}
function track(child) {
  children.add(child.pid);
  child.on('exit', () => children.delete(child.pid));
  return child;
}

// startOncetrace runs `BIN serve` on a free loopback port with a throwaway
// database and waits for /healthz.
async function startOncetrace(bin, tmp) {
  const port = await freePort();
  const logPath = path.join(tmp, 'oncetrace.log');
  const log = fs.openSync(logPath, 'a');
  const child = track(spawn(bin, ['serve', '--addr', `127.0.0.1:${port}`, '--db', path.join(tmp, 'x.db')], {
    stdio: ['ignore', log, log],
  }));
  let exited = null;
  child.on('exit', (code, signal) => { exited = { code, signal }; });
  child.on('error', (err) => { exited = { err }; });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited) throw new Error(`oncetrace serve exited before /healthz answered (${JSON.stringify(exited)}):\n${fs.readFileSync(logPath, 'utf8')}`);
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) break;
    } catch {}
    if (Date.now() > deadline) throw new Error(`oncetrace serve: /healthz did not answer within 30 s:\n${fs.readFileSync(logPath, 'utf8')}`);
    await sleep(100);
  }
  return {
    url,
    logPath,
    stop: () => new Promise((resolve) => {
      if (exited) return resolve();
      child.once('exit', resolve);
      process.kill(child.pid, 'SIGTERM');
      setTimeout(() => { if (!exited) process.kill(child.pid, 'SIGKILL'); }, 5000).unref();
    }),
  };
}

// The recorders write into the current run's capture; runs are sequential.
let capture = null;
function newCapture(framework, run) {
  return { framework, run, seq: 0, otlp: [], entries: [], pending: new Set() };
}

// startOTLPRecorder saves each POST /v1/traces body as sent and answers 200
// with an empty protobuf body; /v1/logs and /v1/metrics are answered, not kept.
async function startOTLPRecorder() {
  const server = http.createServer((req, res) => {
    const at = Date.now();
    const pathname = new URL(req.url, 'http://x').pathname;
    const cap = capture;
    let entry = null;
    if (req.method === 'POST' && pathname === '/v1/traces' && cap) {
      entry = { seq: ++cap.seq, kind: 'otlp', at_ms: at, content_type: req.headers['content-type'] ?? '', content_encoding: req.headers['content-encoding'] ?? '' };
      cap.entries.push(entry);
      cap.pending.add(entry);
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (entry) {
        cap.otlp.push(Buffer.concat(chunks));
        entry.body_file = `otlp-${String(cap.otlp.length).padStart(3, '0')}.pb`;
        cap.pending.delete(entry);
      } else if (pathname === '/v1/traces') {
        console.error(`otlp recorder: ${req.method} ${pathname} outside a run, not recorded`);
      }
      if (req.method === 'POST' && ['/v1/traces', '/v1/logs', '/v1/metrics'].includes(pathname)) {
        res.writeHead(200, { 'Content-Type': 'application/x-protobuf', 'Content-Length': 0 });
      } else {
        res.writeHead(404, { 'Content-Length': 0 });
      }
      res.end();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

// startMailProxy forwards every request to the sandbox unchanged (method,
// path, headers, body) and records it with the answer's status, or
// "aborted" when the client gave up first; then it aborts the upstream
// request too, as the client's own disconnect would have.
async function startMailProxy(upstream) {
  const up = new URL(upstream);
  const server = http.createServer((req, res) => {
    const cap = capture;
    const entry = { seq: 0, kind: 'mail', at_ms: Date.now(), method: req.method, path: req.url, headers: { ...req.headers }, body: '', status: null, end_ms: null, response_body: '' };
    if (cap) {
      entry.seq = ++cap.seq;
      cap.entries.push(entry);
      cap.pending.add(entry);
    } else {
      console.error(`mail proxy: ${req.method} ${req.url} outside a run, not recorded`);
    }
    const done = (status) => {
      if (entry.status !== null) return;
      entry.status = status;
      entry.end_ms = Date.now();
      cap?.pending.delete(entry);
    };
    let upstreamReq = null;
    res.on('close', () => {
      if (!res.writableFinished) {
        done('aborted');
        upstreamReq?.destroy();
      }
    });
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      entry.body = body.toString('utf8');
      if (entry.status !== null) return; // the client left while sending
      upstreamReq = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
        const out = [];
        upRes.on('data', (c) => out.push(c));
        upRes.on('end', () => {
          const b = Buffer.concat(out);
          entry.response_body = b.toString('utf8');
          res.writeHead(upRes.statusCode, upRes.headers);
          res.end(b, () => done(upRes.statusCode));
        });
        upRes.on('error', () => {});
      });
      upstreamReq.on('error', (err) => {
        if (entry.status !== null) return; // aborted by us
        entry.response_body = `proxy: ${err.message}`;
        res.writeHead(502, { 'Content-Type': 'text/plain' });
        res.end(entry.response_body, () => done(502));
      });
      upstreamReq.end(body);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }) };
}

function runChild(script, env, label) {
  return new Promise((resolve, reject) => {
    const child = track(spawn(process.execPath, [path.join(HERE, script)], { cwd: HERE, env, stdio: ['ignore', 'pipe', 'pipe'] }));
    let out = '';
    child.stdout.on('data', (c) => { out += c; });
    child.stderr.on('data', (c) => { out += c; });
    const timer = setTimeout(() => {
      out += `\n[run.mjs: killed after ${RUN_TIMEOUT_MS / 1000} s]`;
      process.kill(child.pid, 'SIGKILL');
    }, RUN_TIMEOUT_MS);
    child.on('error', (err) => { clearTimeout(timer); reject(err); });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${label}: the agent exited with ${signal ?? code}:\n${out}`));
    });
  });
}

function childEnv(urls, run) {
  const env = {};
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG', 'TZ', 'SYSTEMROOT']) if (process.env[k]) env[k] = process.env[k];
  return {
    ...env,
    FIXTURE_OPENAI_BASE_URL: urls.openai,
    FIXTURE_MAIL_URL: urls.mail,
    FIXTURE_RUN: run,
    OPENAI_BASE_URL: urls.openai,
    OPENAI_API_KEY: 'sk-fixture-not-a-real-key',
    OTEL_EXPORTER_OTLP_ENDPOINT: urls.otlp,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_METRICS_EXPORTER: 'none',
    OTEL_LOGS_EXPORTER: 'none',
    OTEL_BSP_SCHEDULE_DELAY: '200',
    NODE_ENV: 'production',
  };
}

function packageVersions({ packages, nested = [] }) {
  const out = {};
  for (const name of packages) {
    const candidates = [...nested.map((n) => path.join(HERE, 'node_modules', n, 'node_modules', name, 'package.json')), path.join(HERE, 'node_modules', name, 'package.json')];
    const found = candidates.find((p) => fs.existsSync(p));
    if (!found) throw new Error(`package ${name} is not installed`);
    out[name] = JSON.parse(fs.readFileSync(found, 'utf8')).version;
  }
  return out;
}

// checkRun decodes the run's OTLP requests and checks what every fixture
// must show; it returns the facts the manifest and the summary report.
function checkRun(cap) {
  const problems = [];
  const spans = cap.otlp.flatMap((b) => decodeTraces(b));
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const mails = cap.entries.filter((e) => e.kind === 'mail');
  if (cap.otlp.length === 0) problems.push('no OTLP request');
  for (const e of cap.entries) {
    if (e.kind === 'otlp' && e.content_type !== 'application/x-protobuf') problems.push(`OTLP request ${e.seq}: content-type ${e.content_type}`);
  }
  if (mails.length !== 2) problems.push(`${mails.length} mail requests, want 2`);
  const [m1, m2] = mails;
  if (m1 && m1.status !== 'aborted') problems.push(`first mail request: status ${m1.status}, want aborted`);
  if (m1 && m1.headers['x-oncetrace-fault'] !== 'lose-response') problems.push('first mail request: no X-Oncetrace-Fault: lose-response');
  if (m2 && m2.status !== 200) problems.push(`second mail request: status ${m2.status}, want 200`);
  for (const m of mails) {
    if (m.body !== JSON.stringify(TOOL_ARGS)) problems.push(`mail request ${m.seq}: body ${m.body}`);
    if (cap.run === 'naive' && m.headers['idempotency-key']) problems.push(`naive mail request ${m.seq} has an Idempotency-Key`);
    if (cap.run === 'keyed' && !/^ik_[0-9a-f]{32}$/.test(m.headers['idempotency-key'] ?? '')) problems.push(`keyed mail request ${m.seq}: Idempotency-Key ${m.headers['idempotency-key']}`);
  }
  if (cap.run === 'keyed' && m1 && m2) {
    if (m1.headers['idempotency-key'] !== m2.headers['idempotency-key']) problems.push('keyed: the two mail requests carry different keys');
    if (!/"deduplicated":true/.test(m2.response_body)) problems.push(`keyed: the retry was not answered from the key store: ${m2.response_body}`);
  }
  if (cap.run === 'naive' && m2 && /"deduplicated":true/.test(m2.response_body)) problems.push('naive: the retry was deduplicated');

  const links = mails.map((m) => {
    const tp = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(m.headers.traceparent ?? '');
    if (!tp) {
      problems.push(`mail request ${m.seq}: traceparent ${m.headers.traceparent}`);
      return null;
    }
    const http = byId.get(tp[2]);
    if (!http) {
      problems.push(`mail request ${m.seq}: traceparent's parent ${tp[2]} is no exported span`);
      return { traceId: tp[1], httpSpanId: tp[2] };
    }
    if (http.kind !== 3) problems.push(`mail request ${m.seq}: traceparent's parent "${http.name}" is ${SPAN_KIND[http.kind]}, not CLIENT`);
    const tool = byId.get(http.parentSpanId) ?? null;
    return { traceId: tp[1], httpSpanId: tp[2], http, toolSpanId: http.parentSpanId, tool };
  });
  const traceIds = new Set(spans.map((s) => s.traceId));
  if (traceIds.size !== 1) problems.push(`${traceIds.size} trace ids, want 1`);
  for (const l of links) if (l && !traceIds.has(l.traceId)) problems.push(`a traceparent names trace ${l.traceId}, which no exported span has`);
  const roots = spans.filter((s) => !s.parentSpanId);
  if (roots.length !== 1) problems.push(`${roots.length} root spans, want 1`);
  // The successful call's tool span must be exported and name the tool; the
  // failed call's may not be (OpenLLMetry never ends it).
  const okTool = links[1]?.tool;
  if (links[1] && !okTool) problems.push('the tool span of the successful call is not exported');
  if (okTool && !JSON.stringify(okTool.attributes).includes(TOOL_NAME) && !okTool.name.includes(TOOL_NAME)) problems.push(`tool span "${okTool.name}" does not name ${TOOL_NAME}`);
  if (roots[0] && !JSON.stringify(roots[0].attributes).includes(AGENT_NAME) && !roots[0].name.includes(AGENT_NAME)) problems.push(`root span "${roots[0].name}" does not name ${AGENT_NAME}`);
  return {
    problems,
    spans,
    links,
    toolErrorSpanExported: Boolean(links[0]?.tool),
    perRequest: cap.otlp.map((b) => decodeTraces(b).length),
  };
}

function summarize(cap, facts) {
  const lines = [];
  const names = new Map();
  for (const s of facts.spans) names.set(s.name, (names.get(s.name) ?? 0) + 1);
  lines.push(`  ${facts.perRequest.length} OTLP requests (spans per request: ${facts.perRequest.join(', ')}); spans: ${[...names].map(([n, c]) => (c > 1 ? `${n} ×${c}` : n)).join(', ')}`);
  facts.links.forEach((l, i) => {
    if (!l) return;
    const tool = l.tool ? `"${l.tool.name}"${l.tool.status.code === 2 ? ' (ERROR)' : ''}` : `${l.toolSpanId || '-'} (NOT EXPORTED)`;
    lines.push(`  mail ${i + 1}: status ${cap.entries.filter((e) => e.kind === 'mail')[i].status}; traceparent → ${l.http ? `"${l.http.name}" ${SPAN_KIND[l.http.kind]}` : 'missing span'} → parent ${tool}`);
  });
  return lines.join('\n');
}

async function writeRun(outDir, cap, facts, packages, modelCalls) {
  const dir = path.join(outDir, cap.framework, cap.run);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  cap.otlp.forEach((b, i) => fs.writeFileSync(path.join(dir, `otlp-${String(i + 1).padStart(3, '0')}.pb`), b));
  const lines = cap.entries.map((e) => {
    if (e.kind === 'otlp') {
      const { seq, kind, at_ms, content_type, content_encoding, body_file } = e;
      return JSON.stringify({ seq, kind, at_ms, content_type, content_encoding, body_file });
    }
    const { seq, kind, at_ms, method, path: p, headers, body, status, end_ms, response_body } = e;
    return JSON.stringify({ seq, kind, at_ms, method, path: p, headers, body, status, end_ms, response_body });
  });
  fs.writeFileSync(path.join(dir, 'requests.jsonl'), lines.join('\n') + '\n');
  const manifest = {
    framework: cap.framework,
    run: cap.run,
    agent_name: AGENT_NAME,
    tool: TOOL_NAME,
    packages,
    tool_error_span_exported: facts.toolErrorSpanExported,
    model_api: [...new Set(modelCalls.map((c) => c.api))].join(','),
    model_calls: modelCalls.length,
    otlp_requests: cap.otlp.length,
    spans: facts.spans.length,
    node: process.version,
    generated_at: new Date().toISOString(),
  };
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(opts.oncetrace)) throw new Error(`--oncetrace ${opts.oncetrace}: no such file`);
  const selected = [];
  for (const fw of Object.keys(FRAMEWORKS)) {
    for (const run of RUNS) {
      if (opts.only.length === 0 || opts.only.some((o) => o === fw || o === `${fw}/${run}`)) selected.push([fw, run]);
    }
  }
  if (selected.length === 0) throw new Error(`--only matches nothing; frameworks: ${Object.keys(FRAMEWORKS).join(', ')}; runs: ${RUNS.join(', ')}`);

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oncetrace-fixtures-'));
  const cleanup = [];
  let label = '';
  let failed = false;
  const passed = [];
  try {
    const oncetrace = await startOncetrace(opts.oncetrace, tmp);
    cleanup.push(oncetrace.stop);
    const recorder = await startOTLPRecorder();
    cleanup.push(recorder.close);
    const mail = await startMailProxy(oncetrace.url);
    cleanup.push(mail.close);
    const openai = await startFakeOpenAI({ label: () => label });
    cleanup.push(openai.close);
    const urls = { otlp: recorder.url, mail: mail.url, openai: openai.url };
    console.log(`oncetrace ${oncetrace.url}, OTLP recorder ${recorder.url}, mail proxy ${mail.url}, fake OpenAI ${openai.url}`);

    for (const [fw, run] of selected) {
      label = `${fw}/${run}`;
      const started = Date.now();
      capture = newCapture(fw, run);
      const callsBefore = openai.calls.length;
      const out = await runChild(FRAMEWORKS[fw].script, childEnv(urls, run), label);
      // The child has flushed and exited; its requests are answered, bar
      // a proxy still noticing a disconnect.
      for (let i = 0; i < 50 && capture.pending.size > 0; i++) await sleep(100);
      const cap = capture;
      capture = null;
      if (cap.pending.size > 0) throw new Error(`${label}: ${cap.pending.size} requests still open after the agent exited`);
      const modelCalls = openai.calls.slice(callsBefore);
      const facts = checkRun(cap);
      if (modelCalls.length !== 3) facts.problems.push(`${modelCalls.length} model calls, want 3`);
      console.log(`${label}: ${((Date.now() - started) / 1000).toFixed(1)} s, ${modelCalls.length} model calls (${modelCalls[0]?.api})\n${summarize(cap, facts)}`);
      if (facts.problems.length > 0) {
        throw new Error(`${label}: the recorded run is not what the fixtures need:\n  - ${facts.problems.join('\n  - ')}\nagent output:\n${out}`);
      }
      passed.push([cap, facts, packageVersions(FRAMEWORKS[fw]), modelCalls]);
    }
    // Written only once every run passed: a failure leaves the fixtures as they were.
    for (const r of passed) await writeRun(opts.out, ...r);
    console.log(`wrote ${passed.map(([c]) => `${c.framework}/${c.run}`).join(', ')} under ${opts.out}`);
  } catch (err) {
    failed = true;
    console.error(`run.mjs: ${err.stack || err}`);
  } finally {
    for (const c of cleanup.reverse()) await c().catch(() => {});
    if (failed) console.error(`run.mjs: oncetrace's log is in ${path.join(tmp, 'oncetrace.log')}`);
    else fs.rmSync(tmp, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}

await main();
