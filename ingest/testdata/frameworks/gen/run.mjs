#!/usr/bin/env node
// Fixture generator: runs billing-agent on real agent frameworks and
// records exactly what each sends, for ingest's Go tests to replay without
// Node.
//
//   node run.mjs --oncetrace BIN --out DIR [--only FRAMEWORK[/RUN] | mcp[/TRANSPORT[/RUN]]]...
//
// It starts a real `oncetrace serve` (whose sandbox mail API the tool calls),
// an OTLP recorder, a recording proxy in front of the sandbox and a fake
// OpenAI server, then runs each framework's agent twice (naive, keyed), each
// in a child process of its own, and writes DIR/<framework>/<run>/:
//   otlp-001.pb …   each OTLP export request body, byte for byte
//   requests.jsonl  OTLP and mail requests in arrival order
//   manifest.json   what ran, with which package versions
// It also runs the MCP fixtures (lib/mcp-fixture.mjs): billing-agent's MCP
// client (agents/mcp/client.mjs) against the MCP server (agents/mcp/server.mjs)
// through `oncetrace mcp-stdio` and `oncetrace tap --mcp`, naive and keyed,
// with the proxy's recordings going through an events proxy in front of
// `oncetrace serve`, and writes DIR/mcp/<transport>/<run>/:
//   events-001.json …  each POST /api/v1/events body the proxy sent
//   requests.jsonl     events and mail requests in arrival order
//   client.json        the client's summary
//   manifest.json      what ran, with which versions
// (--only mcp, mcp/stdio, mcp/http/keyed, …).
// It checks each run's invariants (see checkRun, checkMCPRun) and fails when
// one breaks; it writes nothing unless every selected run passed.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFakeOpenAI } from './lib/fake-openai.mjs';
import { startFakeGemini } from './lib/fake-gemini.mjs';
import { decodeTraces, SPAN_KIND } from './lib/otlp-decode.mjs';
import { AGENT_NAME, TOOL_NAME, TOOL_ARGS, idempotencyKey } from './lib/tool.mjs';
import { MCP_PACKAGES, MCP_PROVIDER, MCP_RUNS, MCP_TRANSPORTS, checkMCPRun, clientArgs, recordedEvents, summarizeMCP, writeMCPRun } from './lib/mcp-fixture.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const RUNS = ['naive', 'keyed'];
// Each framework: the agent `script` (with `env` added to the run's), the
// `packages` the manifest reports, as installed for that agent (looked up
// first under `nested`, the framework's own node_modules, then at the top),
// and what its export is expected to look like (`expect`), checked after each
// run and recorded in the manifest:
//   spans                  names of the root, agent, tool and model spans
//                          (tool: the span a tool call gets, both calls)
//   traces, roots          how many trace ids / root spans a run exports: a
//                          number, or 'several' (more than one, not fixed:
//                          recorded, not checked)
//   rootNamesAgent         the root span names billing-agent (its name or an
//                          attribute); otherwise the `agent` span must
//   httpUnderTool          for each mail request, whether its HTTP client
//                          span's parent is an exported tool span (null: the
//                          parent was never exported)
//   toolErrorSpanExported  the failed call's tool span is exported
const OTEL = ['@opentelemetry/api', '@opentelemetry/sdk-node', '@opentelemetry/exporter-trace-otlp-proto', '@opentelemetry/instrumentation-undici'];
const LANGGRAPH = ['@langchain/langgraph', '@langchain/core', '@langchain/openai', '@arizeai/openinference-instrumentation-langchain', 'zod', ...OTEL];
const FRAMEWORKS = {
  'vercel-ai': {
    script: 'agents/vercel-ai.mjs',
    packages: ['ai', '@ai-sdk/openai', 'zod', ...OTEL],
    expect: {
      spans: { root: 'ai.generateText', agent: 'ai.generateText', tool: 'ai.toolCall', model: 'ai.generateText.doGenerate' },
      traces: 1, roots: 1, rootNamesAgent: true, httpUnderTool: [true, true], toolErrorSpanExported: true,
    },
  },
  openllmetry: {
    script: 'agents/openllmetry.mjs',
    // Traceloop brings its own Node SDK and OTLP exporter (0.203.x) and uses them.
    nested: ['@traceloop/node-server-sdk'],
    packages: ['@traceloop/node-server-sdk', '@traceloop/instrumentation-openai', 'openai', ...OTEL],
    expect: {
      spans: { root: 'billing-agent.agent', agent: 'billing-agent.agent', tool: 'send_invoice_email.tool', model: 'chat gpt-4o-mini' },
      // withTool never ends the failed call's span: its HTTP span's parent is missing.
      traces: 1, roots: 1, rootNamesAgent: true, httpUnderTool: [null, true], toolErrorSpanExported: false,
    },
  },
  openinference: {
    script: 'agents/openinference.mjs',
    packages: ['@arizeai/openinference-instrumentation-openai', '@arizeai/openinference-core', '@arizeai/openinference-semantic-conventions', 'openai', ...OTEL],
    expect: {
      spans: { root: 'billing-agent', agent: 'billing-agent', tool: 'send_invoice_email', model: 'OpenAI Chat Completions' },
      traces: 1, roots: 1, rootNamesAgent: true, httpUnderTool: [true, true], toolErrorSpanExported: true,
    },
  },
  'openai-agents': {
    script: 'agents/openai-agents.mjs',
    // openai: the client the agent is given (the SDK's own nested openai 7 is not used for requests).
    packages: ['@openai/agents', '@openai/agents-core', '@openai/agents-openai', 'openai', 'zod', ...OTEL],
    expect: {
      spans: { root: 'invoke_agent billing-agent', agent: 'invoke_agent billing-agent', tool: 'execute_tool send_invoice_email', model: 'chat gpt-4o-mini' },
      traces: 1, roots: 1, rootNamesAgent: true, httpUnderTool: [true, true], toolErrorSpanExported: true,
    },
  },
  langgraph: {
    script: 'agents/langgraph.mjs',
    packages: LANGGRAPH,
    expect: {
      // The instrumentation never makes its spans active: every fetch's HTTP
      // span is a root of a trace of its own (3 model calls + 2 mails), beside
      // the LangChain trace rooted at the graph's span.
      spans: { root: 'billing-agent', agent: 'billing-agent', tool: 'send_invoice_email', model: 'ChatOpenAI' },
      traces: 'several', roots: 'several', rootNamesAgent: false, httpUnderTool: [false, false], toolErrorSpanExported: true,
    },
  },
  'langgraph-root': {
    script: 'agents/langgraph.mjs',
    env: { FIXTURE_ROOT_SPAN: '1' },
    packages: LANGGRAPH,
    expect: {
      // One trace under the program's own span; the HTTP spans are children
      // of that root span, not of the tool span.
      spans: { root: 'billing-agent', agent: 'billing-agent', tool: 'send_invoice_email', model: 'ChatOpenAI' },
      traces: 1, roots: 1, rootNamesAgent: true, httpUnderTool: [false, false], toolErrorSpanExported: true,
    },
  },
  'mastra-exporter': {
    script: 'agents/mastra.mjs',
    env: { FIXTURE_MASTRA_OTEL: 'exporter' },
    packages: ['@mastra/core', '@mastra/observability', '@mastra/otel-exporter', '@ai-sdk/openai', 'zod', ...OTEL],
    expect: {
      // Mastra's spans go through the exporter's own pipeline, the HTTP spans
      // through the app's: each fetch is a trace of its own.
      spans: { root: 'invoke_agent billing-agent', agent: 'invoke_agent billing-agent', tool: 'execute_tool send_invoice_email', model: 'chat gpt-4o-mini' },
      traces: 'several', roots: 'several', rootNamesAgent: false, httpUnderTool: [false, false], toolErrorSpanExported: true,
    },
  },
  'mastra-bridge': {
    script: 'agents/mastra.mjs',
    env: { FIXTURE_MASTRA_OTEL: 'bridge' },
    packages: ['@mastra/core', '@mastra/observability', '@mastra/otel-bridge', '@ai-sdk/openai', 'zod', ...OTEL],
    expect: {
      // The bridge names spans by its own nested otel-exporter (1.3.12): "chat
      // gpt-4o-mini" is the whole generation here, a model call is a model_step.
      spans: { root: 'invoke_agent billing-agent', agent: 'invoke_agent billing-agent', tool: 'execute_tool send_invoice_email', model: 'model_step billing-agent' },
      traces: 1, roots: 1, rootNamesAgent: true, httpUnderTool: [true, true], toolErrorSpanExported: true,
    },
  },
  adk: {
    script: 'agents/adk.mjs',
    // ADK's own @opentelemetry/api (1.9.0, nested under it) is reported first.
    nested: ['@google/adk'],
    packages: ['@google/adk', '@google/genai', 'zod', ...OTEL],
    expect: {
      // The root is the runner's `invocation` span, which names nothing.
      spans: { root: 'invocation', agent: 'invoke_agent billing-agent', tool: 'execute_tool send_invoice_email', model: 'call_llm' },
      traces: 1, roots: 1, rootNamesAgent: false, httpUnderTool: [true, true], toolErrorSpanExported: true,
    },
  },
};
const RUN_TIMEOUT_MS = 60_000;

const USAGE = 'node run.mjs --oncetrace BIN --out DIR [--only FRAMEWORK[/RUN] | mcp[/TRANSPORT[/RUN]]]...';

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
    else throw new Error(`unknown argument ${a}; usage: ${USAGE}`);
  }
  if (!o.oncetrace || !o.out) throw new Error(`usage: ${USAGE}`);
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

// startRecordingProxy forwards every request to upstream unchanged (method,
// path, headers, body) and records those `records` picks as entries of
// `kind`, with the answer's status, or "aborted" when the client gave up
// first; then it aborts the upstream request too, as the client's own
// disconnect would have. The mail proxy records every request to the
// sandbox; the events proxy (MCP runs) the proxy's POST /api/v1/events and
// passes the rest (its /healthz probes) through unrecorded.
async function startRecordingProxy(upstream, kind, records = () => true) {
  const up = new URL(upstream);
  const server = http.createServer((req, res) => {
    const recorded = records(req);
    const cap = recorded ? capture : null;
    const entry = { seq: 0, kind, at_ms: Date.now(), method: req.method, path: req.url, headers: { ...req.headers }, body: '', raw: null, status: null, end_ms: null, response_body: '' };
    if (cap) {
      entry.seq = ++cap.seq;
      cap.entries.push(entry);
      cap.pending.add(entry);
    } else if (recorded) {
      console.error(`${kind} proxy: ${req.method} ${req.url} outside a run, not recorded`);
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
      entry.raw = body;
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

// runChild runs a Node script with args and resolves with its output: `out`
// both streams as they came, `stdout` its stdout alone.
function runChild(script, env, label, args = []) {
  return new Promise((resolve, reject) => {
    const child = track(spawn(process.execPath, [path.join(HERE, script), ...args], { cwd: HERE, env, stdio: ['ignore', 'pipe', 'pipe'] }));
    let out = '';
    let stdout = '';
    child.stdout.on('data', (c) => { out += c; stdout += c; });
    child.stderr.on('data', (c) => { out += c; });
    const timer = setTimeout(() => {
      out += `\n[run.mjs: killed after ${RUN_TIMEOUT_MS / 1000} s]`;
      process.kill(child.pid, 'SIGKILL');
    }, RUN_TIMEOUT_MS);
    child.on('error', (err) => { clearTimeout(timer); reject(err); });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve({ out, stdout });
      else reject(new Error(`${label}: the agent exited with ${signal ?? code}:\n${out}`));
    });
  });
}

// shellQuote quotes a word for client.mjs's --stdio command line.
function shellQuote(word) {
  return /^[A-Za-z0-9_\/.:=@%+,-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

// startLogged spawns a long-running helper of an MCP run with its output
// in logPath, and returns its stop (SIGTERM, then SIGKILL after 5 s).
function startLogged(cmd, args, env, logPath) {
  const log = fs.openSync(logPath, 'a');
  const child = track(spawn(cmd, args, { cwd: HERE, env, stdio: ['ignore', 'pipe', log] }));
  let exited = null;
  child.on('exit', (code, signal) => { exited = { code, signal }; });
  child.on('error', (err) => { exited = { err }; });
  return {
    child,
    exited: () => exited,
    stop: () => new Promise((resolve) => {
      if (exited) return resolve();
      child.once('exit', resolve);
      process.kill(child.pid, 'SIGTERM');
      setTimeout(() => { if (!exited) process.kill(child.pid, 'SIGKILL'); }, 5000).unref();
    }),
  };
}

// startMCPHTTPServer runs server.mjs over Streamable HTTP on a free port
// and resolves with its endpoint, the first line it prints.
async function startMCPHTTPServer(env, mailURL, logPath) {
  const server = startLogged(process.execPath, [path.join(HERE, 'agents/mcp/server.mjs'), '--http', '127.0.0.1:0', '--mail', mailURL], env, logPath);
  const url = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server.mjs --http printed no endpoint within 30 s: ${out}`)), 30_000);
    server.child.stdout.on('data', (c) => {
      out += c;
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      try {
        resolve(JSON.parse(out.slice(0, nl)).url);
      } catch (err) {
        reject(new Error(`server.mjs --http: its first line is not {"url"}: ${out}`));
      }
    });
    server.child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server.mjs --http exited with ${code} before printing its endpoint; see ${logPath}`)); });
  });
  server.child.stdout.resume();
  return { url, stop: server.stop };
}

// startTapMCP runs `oncetrace tap --mcp` in front of upstream (the MCP
// endpoint) on a free port, recording into eventsURL, and resolves once it
// accepts connections, with the endpoint the client speaks to.
async function startTapMCP(bin, upstream, eventsURL, queueDir, env, logPath) {
  const port = await freePort();
  const tap = startLogged(bin, ['tap', '--mcp', '--upstream', upstream, '--provider', MCP_PROVIDER, '--listen', `127.0.0.1:${port}`,
    '--server', eventsURL, '--queue-dir', queueDir], env, logPath);
  tap.child.stdout.resume();
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (tap.exited()) throw new Error(`oncetrace tap --mcp exited (${JSON.stringify(tap.exited())}):\n${fs.readFileSync(logPath, 'utf8')}`);
    const up = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.destroy(); resolve(true); });
      c.on('error', () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline) throw new Error(`oncetrace tap --mcp: 127.0.0.1:${port} did not accept within 30 s:\n${fs.readFileSync(logPath, 'utf8')}`);
    await sleep(100);
  }
  return { url: `http://127.0.0.1:${port}${new URL(upstream).pathname}`, stop: tap.stop };
}

// runMCP runs one MCP fixture run: server.mjs behind the transport's
// recording proxy (recording into the events proxy), client.mjs in front,
// with the run's mode and faults. It resolves once the proxy has recorded
// an attempt for every tools/call the client made, with the client's
// summary and output.
async function runMCP(bin, transport, run, urls, tmp, label) {
  const env = childEnv(urls, run);
  const mailURL = `${urls.mail}/sandbox/mail/v1/send`;
  const work = path.join(tmp, 'mcp', transport, run);
  fs.mkdirSync(work, { recursive: true });
  const queueDir = path.join(work, 'queue');
  const stops = [];
  let target;
  try {
    if (transport === 'stdio') {
      // The client launches mcp-stdio in the server's place, as a
      // Claude-Desktop-style configuration would (docs/mcp.md).
      const cmd = [bin, 'mcp-stdio', '--provider', MCP_PROVIDER, '--server', urls.events, '--queue-dir', queueDir,
        '--', process.execPath, path.join(HERE, 'agents/mcp/server.mjs'), '--stdio', '--mail', mailURL];
      target = ['--stdio', cmd.map(shellQuote).join(' ')];
    } else {
      const server = await startMCPHTTPServer(env, mailURL, path.join(work, 'server.log'));
      stops.push(server.stop);
      const tap = await startTapMCP(bin, server.url, urls.events, queueDir, env, path.join(work, 'tap.log'));
      stops.push(tap.stop);
      target = ['--http', tap.url];
    }
    const { out, stdout } = await runChild('agents/mcp/client.mjs', env, label, [...target, ...clientArgs(run)]);
    const summary = JSON.parse(stdout.trim().split('\n').at(-1));
    // The proxy records a call when its answer comes (or the session
    // ends) and posts beside the relay; the tap also records what it
    // still holds as it stops, before the server does. Then wait for
    // every call's attempt.
    for (const stop of stops.splice(0).reverse()) await stop();
    const deadline = Date.now() + 20_000;
    const recorded = () => recordedEvents(capture).filter((e) => e.type === 'attempt').length;
    while ((recorded() < summary.calls_made || capture.pending.size > 0) && Date.now() < deadline) await sleep(100);
    return { summary, out };
  } finally {
    for (const stop of stops.reverse()) await stop();
  }
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
    GOOGLE_GEMINI_BASE_URL: urls.gemini,
    GOOGLE_GENAI_API_KEY: 'fixture-not-a-real-key',
    OTEL_EXPORTER_OTLP_ENDPOINT: urls.otlp,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_METRICS_EXPORTER: 'none',
    OTEL_LOGS_EXPORTER: 'none',
    OTEL_BSP_SCHEDULE_DELAY: '200',
    NODE_ENV: 'production',
    MASTRA_TELEMETRY_DISABLED: '1',
  };
}

// oncetraceVersion is the binary's version line and the commit of the
// tree run.mjs is in (the binary knows its own only when `make build`
// stamped it).
function oncetraceVersion(bin) {
  const version = spawnSync(bin, ['version'], { encoding: 'utf8' }).stdout?.split('\n')[0] ?? null;
  const commit = spawnSync('git', ['-C', HERE, 'describe', '--always', '--dirty', '--abbrev=12'], { encoding: 'utf8' }).stdout?.trim() || null;
  return { version, commit };
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

  const { expect } = FRAMEWORKS[cap.framework];
  const names = (s) => s.name.includes(AGENT_NAME) || JSON.stringify(s.attributes).includes(AGENT_NAME);
  const isTool = (s) => s && s.name === expect.spans.tool && (s.name.includes(TOOL_NAME) || JSON.stringify(s.attributes).includes(TOOL_NAME));
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
    const parent = http.parentSpanId ? byId.get(http.parentSpanId) ?? null : null;
    // underTool: the HTTP span's parent is an exported tool span; null when
    // it has a parent that was never exported.
    const underTool = http.parentSpanId && !parent ? null : Boolean(isTool(parent));
    return { traceId: tp[1], httpSpanId: tp[2], http, parentSpanId: http.parentSpanId, parent, underTool, tool: underTool ? parent : null };
  });
  const traceIds = new Set(spans.map((s) => s.traceId));
  for (const l of links) if (l && !traceIds.has(l.traceId)) problems.push(`a traceparent names trace ${l.traceId}, which no exported span has`);
  const roots = spans.filter((s) => !s.parentSpanId);
  const count = (what, n, want) => {
    if (want === 'several' ? n < 2 : n !== want) problems.push(`${n} ${what}, want ${want}`);
  };
  count('trace ids', traceIds.size, expect.traces);
  count('root spans', roots.length, expect.roots);

  // Per-framework facts, checked against `expect`.
  const httpUnderTool = links.map((l) => (l ? l.underTool ?? null : null));
  if (JSON.stringify(httpUnderTool) !== JSON.stringify(expect.httpUnderTool)) problems.push(`HTTP span under a tool span, by mail: ${JSON.stringify(httpUnderTool)}, want ${JSON.stringify(expect.httpUnderTool)}`);
  const toolSpans = spans.filter(isTool).sort((a, b) => (a.start < b.start ? -1 : 1));
  const toolErrorSpanExported = toolSpans.length === 2;
  if (toolSpans.length < 1 || toolSpans.length > 2) problems.push(`${toolSpans.length} tool spans "${expect.spans.tool}" naming ${TOOL_NAME}, want 1 or 2`);
  if (toolErrorSpanExported !== expect.toolErrorSpanExported) problems.push(`the failed call's tool span ${toolErrorSpanExported ? 'is' : 'is not'} exported, want ${expect.toolErrorSpanExported}`);
  // The successful call's tool span is exported; its HTTP span, where it is
  // under a tool span, is under this one.
  const okTool = toolSpans.at(-1);
  if (links[1]?.underTool && links[1].tool !== okTool) problems.push('the successful mail request is not under the last tool span');
  for (const [role, name] of Object.entries(expect.spans)) {
    if (!spans.some((s) => s.name === name)) problems.push(`no ${role} span "${name}"`);
  }
  const rootSpan = roots.find((s) => s.name === expect.spans.root);
  if (!rootSpan) problems.push(`no root span "${expect.spans.root}"`);
  if (expect.rootNamesAgent && rootSpan && !names(rootSpan)) problems.push(`root span "${rootSpan.name}" does not name ${AGENT_NAME}`);
  const agentSpan = spans.find((s) => s.name === expect.spans.agent);
  if (agentSpan && !names(agentSpan)) problems.push(`agent span "${agentSpan.name}" does not name ${AGENT_NAME}`);
  // Keyed: was the key derived from the mail's own trace, from another trace
  // the run exported (the framework's), or from no trace id (the framework's run id)?
  let keyFrom = null;
  if (cap.run === 'keyed' && m1) {
    const key = m1.headers['idempotency-key'];
    const args = JSON.parse(m1.body);
    const from = (t) => idempotencyKey(t, TOOL_NAME, args) === key;
    keyFrom = links[0] && from(links[0].traceId) ? 'mail_trace' : [...traceIds].some(from) ? 'other_trace' : 'no_trace';
  }
  return {
    problems,
    spans,
    links,
    toolErrorSpanExported,
    toolErrorSpanStatus: toolErrorSpanExported ? ['UNSET', 'OK', 'ERROR'][toolSpans[0].status.code] : null,
    httpUnderTool,
    traceIds: traceIds.size,
    roots: roots.map((s) => s.name),
    keyFrom,
    perRequest: cap.otlp.map((b) => decodeTraces(b).length),
  };
}

function summarize(cap, facts) {
  const lines = [];
  const names = new Map();
  for (const s of facts.spans) names.set(s.name, (names.get(s.name) ?? 0) + 1);
  lines.push(`  ${facts.traceIds} traces; roots: ${facts.roots.join(', ')}`);
  lines.push(`  ${facts.perRequest.length} OTLP requests (spans per request: ${facts.perRequest.join(', ')}); spans: ${[...names].map(([n, c]) => (c > 1 ? `${n} ×${c}` : n)).join(', ')}`);
  facts.links.forEach((l, i) => {
    if (!l) return;
    const p = l.parent;
    const tool = p ? `"${p.name}"${p.status.code === 2 ? ' (ERROR)' : ''}${l.underTool ? '' : ' (not a tool span)'}` : l.parentSpanId ? `${l.parentSpanId} (NOT EXPORTED)` : '- (a root)';
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
    tool_error_span_status: facts.toolErrorSpanStatus,
    http_under_tool: facts.httpUnderTool,
    trace_ids: facts.traceIds,
    root_spans: facts.roots.length,
    root_span_names: [...new Set(facts.roots)],
    ...(facts.keyFrom ? { idempotency_key_from: facts.keyFrom } : {}),
    span_names: FRAMEWORKS[cap.framework].expect.spans,
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
  // MCP runs: --only mcp, mcp/TRANSPORT or mcp/TRANSPORT/RUN.
  const selectedMCP = [];
  for (const transport of MCP_TRANSPORTS) {
    for (const run of Object.keys(MCP_RUNS)) {
      if (opts.only.length === 0 || opts.only.some((o) => ['mcp', `mcp/${transport}`, `mcp/${transport}/${run}`].includes(o))) selectedMCP.push([transport, run]);
    }
  }
  if (selected.length === 0 && selectedMCP.length === 0) {
    throw new Error(`--only matches nothing; frameworks: ${Object.keys(FRAMEWORKS).join(', ')}; runs: ${RUNS.join(', ')}; or mcp[/${MCP_TRANSPORTS.join('|')}[/${Object.keys(MCP_RUNS).join('|')}]]`);
  }

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
    const mail = await startRecordingProxy(oncetrace.url, 'mail');
    cleanup.push(mail.close);
    const openai = await startFakeOpenAI({ label: () => label });
    cleanup.push(openai.close);
    const gemini = await startFakeGemini({ label: () => label });
    cleanup.push(gemini.close);
    // The MCP proxies post their recordings through this one.
    const events = await startRecordingProxy(oncetrace.url, 'events', (req) => req.method === 'POST' && new URL(req.url, 'http://x').pathname === '/api/v1/events');
    cleanup.push(events.close);
    const urls = { otlp: recorder.url, mail: mail.url, openai: openai.url, gemini: gemini.url, events: events.url };
    console.log(`oncetrace ${oncetrace.url}, OTLP recorder ${recorder.url}, mail proxy ${mail.url}, events proxy ${events.url}, fake OpenAI ${openai.url}, fake Gemini ${gemini.url}`);
    const modelCallsSoFar = () => [...openai.calls, ...gemini.calls].sort((a, b) => a.at_ms - b.at_ms);

    for (const [fw, run] of selected) {
      label = `${fw}/${run}`;
      const started = Date.now();
      capture = newCapture(fw, run);
      const callsBefore = new Set(modelCallsSoFar());
      const { out } = await runChild(FRAMEWORKS[fw].script, { ...childEnv(urls, run), ...FRAMEWORKS[fw].env }, label);
      // The child has flushed and exited; its requests are answered, bar
      // a proxy still noticing a disconnect.
      for (let i = 0; i < 50 && capture.pending.size > 0; i++) await sleep(100);
      const cap = capture;
      capture = null;
      if (cap.pending.size > 0) throw new Error(`${label}: ${cap.pending.size} requests still open after the agent exited`);
      const modelCalls = modelCallsSoFar().filter((c) => !callsBefore.has(c));
      const facts = checkRun(cap);
      if (modelCalls.length !== 3) facts.problems.push(`${modelCalls.length} model calls, want 3`);
      console.log(`${label}: ${((Date.now() - started) / 1000).toFixed(1)} s, ${modelCalls.length} model calls (${modelCalls[0]?.api})\n${summarize(cap, facts)}`);
      if (facts.problems.length > 0) {
        // Kept for a look (lib/otlp-decode.mjs), beside oncetrace's log.
        await writeRun(path.join(tmp, 'failed'), cap, facts, {}, modelCalls);
        throw new Error(`${label}: the recorded run is not what the fixtures need:\n  - ${facts.problems.join('\n  - ')}\nagent output:\n${out}`);
      }
      const packages = packageVersions(FRAMEWORKS[fw]);
      passed.push({ label, write: () => writeRun(opts.out, cap, facts, packages, modelCalls) });
    }
    const mcpExtra = selectedMCP.length > 0 ? { packages: packageVersions({ packages: MCP_PACKAGES }), oncetrace: oncetraceVersion(opts.oncetrace), node: process.version } : null;
    for (const [transport, run] of selectedMCP) {
      label = `mcp/${transport}/${run}`;
      const started = Date.now();
      capture = { ...newCapture('mcp', run), transport };
      const { summary, out } = await runMCP(opts.oncetrace, transport, run, urls, tmp, label);
      const cap = capture;
      capture = null;
      if (cap.pending.size > 0) throw new Error(`${label}: ${cap.pending.size} requests still open after the run`);
      const { problems, facts } = checkMCPRun(cap, summary);
      console.log(`${label}: ${((Date.now() - started) / 1000).toFixed(1)} s\n${summarizeMCP(facts)}`);
      if (problems.length > 0) {
        writeMCPRun(path.join(tmp, 'failed'), cap, summary, facts, mcpExtra);
        throw new Error(`${label}: the recorded run is not what the fixtures need:\n  - ${problems.join('\n  - ')}\nclient and proxy output:\n${out}`);
      }
      passed.push({ label, write: () => writeMCPRun(opts.out, cap, summary, facts, mcpExtra) });
    }
    // Written only once every run passed: a failure leaves the fixtures as they were.
    for (const r of passed) await r.write();
    console.log(`wrote ${passed.map((r) => r.label).join(', ')} under ${opts.out}`);
  } catch (err) {
    failed = true;
    console.error(`run.mjs: ${err.stack || err}`);
  } finally {
    for (const c of cleanup.reverse()) await c().catch(() => {});
    if (failed) console.error(`run.mjs: oncetrace's log is in ${path.join(tmp, 'oncetrace.log')}; a failed run's requests are under ${path.join(tmp, 'failed')}`);
    else fs.rmSync(tmp, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}

await main();
