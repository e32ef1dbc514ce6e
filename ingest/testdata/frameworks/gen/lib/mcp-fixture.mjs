// The MCP fixtures (issue 25): what run.mjs runs for each, what a recorded
// run must show before it is written, and how it is written.
//
// A run is billing-agent's MCP client loop (agents/mcp/client.mjs) calling
// the MCP server (agents/mcp/server.mjs, whose send_invoice_email sends
// through the sandbox mail API) through oncetrace's recording proxy for the
// transport: `oncetrace mcp-stdio` (stdio) or `oncetrace tap --mcp`
// (Streamable HTTP). The proxy posts what it recorded, native events, to
// `oncetrace serve`'s POST /api/v1/events through the harness's events
// proxy; those request bodies, byte for byte, are the fixture, for Go tests
// to replay into a fresh store.
import fs from 'node:fs';
import path from 'node:path';
import { ANNOTATIONS, CHARGE_CARD, CLIENT_NAME, META_KEY, SEND_INVOICE_EMAIL, SERVER_NAME, TOOLS } from '../agents/mcp/billing.mjs';

// MCP_PROVIDER names the MCP server in what the proxy records.
export const MCP_PROVIDER = SERVER_NAME;
export const MCP_TRANSPORTS = ['stdio', 'http'];
export const MCP_PROXIES = { stdio: 'oncetrace mcp-stdio', http: 'oncetrace tap --mcp' };
// The client's own tools/call timeout: what fires when the proxy loses an answer.
export const MCP_CALL_TIMEOUT_MS = 2000;
// Each run: the client's mode and the faults it asks the proxy for, on the
// first try of each tool named.
export const MCP_RUNS = {
  naive: { mode: 'naive', faults: { [SEND_INVOICE_EMAIL]: 'lose-response' } },
  keyed: { mode: 'keyed', faults: { [SEND_INVOICE_EMAIL]: 'lose-response', [CHARGE_CARD]: 'lose-response' } },
};
export const MCP_PACKAGES = ['@modelcontextprotocol/sdk', 'zod'];

export function clientArgs(run) {
  const { mode, faults } = MCP_RUNS[run];
  const args = ['--mode', mode, '--timeout-ms', String(MCP_CALL_TIMEOUT_MS)];
  for (const [tool, fault] of Object.entries(faults)) args.push('--fault-on', `${tool}=${fault}`);
  return args;
}

const readOnly = (tool) => Boolean(ANNOTATIONS[tool]?.readOnlyHint);

// expected is what a run must show for each tool: the client's tries'
// outcomes and how many distinct effects the proxy records (keyed, the
// server answers a retry with the first call's id).
function expected(run) {
  const { mode, faults } = MCP_RUNS[run];
  const out = {};
  for (const tool of TOOLS) {
    const outcomes = faults[tool] === 'lose-response' ? ['timeout', 'ok'] : ['ok'];
    out[tool] = { outcomes, effects: readOnly(tool) ? 0 : mode === 'keyed' ? 1 : outcomes.length };
  }
  return out;
}

// recordedEvents parses the run's POST /api/v1/events bodies (JSON arrays,
// as the proxies send them) into one list, in arrival order.
export function recordedEvents(cap) {
  const events = [];
  for (const e of cap.entries) {
    if (e.kind !== 'events') continue;
    const body = JSON.parse(e.raw.toString('utf8'));
    events.push(...(Array.isArray(body) ? body : [body]));
  }
  return events;
}

// checkMCPRun checks the client's summary, the mail requests the server
// made and the events the proxy recorded against the run's expectations;
// it returns the problems and the facts the manifest reports.
export function checkMCPRun(cap, summary) {
  const problems = [];
  const want = expected(cap.run);
  const { mode } = MCP_RUNS[cap.run];

  // The client: every tool answered; the tries and their outcomes.
  if (!summary.ok) problems.push(`the client did not finish: ${summary.error ?? 'a tool failed'}`);
  for (const t of summary.tools) {
    if (JSON.stringify(t.annotations ?? undefined) !== JSON.stringify(ANNOTATIONS[t.name])) problems.push(`tools/list: ${t.name}'s annotations ${JSON.stringify(t.annotations)}, want ${JSON.stringify(ANNOTATIONS[t.name])}`);
  }
  const keys = {};
  for (const tool of TOOLS) {
    const tries = summary.calls.filter((c) => c.tool === tool);
    const outcomes = tries.map((c) => c.outcome);
    if (JSON.stringify(outcomes) !== JSON.stringify(want[tool].outcomes)) problems.push(`the client's ${tool}: ${JSON.stringify(outcomes)}, want ${JSON.stringify(want[tool].outcomes)}`);
    const triedKeys = [...new Set(tries.map((c) => c._meta?.[META_KEY] ?? null))];
    keys[tool] = triedKeys[0];
    const wantKey = mode === 'keyed' && !readOnly(tool);
    if (triedKeys.length !== 1 || Boolean(triedKeys[0]) !== wantKey) problems.push(`the client's ${tool}: keys ${JSON.stringify(triedKeys)}, want ${wantKey ? 'one key on every try' : 'none'}`);
  }

  // The server's emails: one mail request per try of send_invoice_email,
  // each answered 200 (the proxy loses the MCP answer, not the mail API's);
  // keyed, the retry is answered from the sandbox's key store.
  const mails = cap.entries.filter((e) => e.kind === 'mail');
  const sendTries = want[SEND_INVOICE_EMAIL].outcomes.length;
  if (mails.length !== sendTries) problems.push(`${mails.length} mail requests, want ${sendTries}`);
  const mailIds = [];
  for (const m of mails) {
    if (m.status !== 200) problems.push(`mail request ${m.seq}: status ${m.status}, want 200`);
    const key = m.headers['idempotency-key'] ?? null;
    if (key !== (keys[SEND_INVOICE_EMAIL] ?? null)) problems.push(`mail request ${m.seq}: Idempotency-Key ${key}, want the client's ${keys[SEND_INVOICE_EMAIL] ?? 'none'}`);
    try {
      mailIds.push(JSON.parse(m.response_body).id);
    } catch {
      problems.push(`mail request ${m.seq}: the answer is not JSON: ${m.response_body}`);
    }
  }
  const distinctMails = [...new Set(mailIds)];
  if (distinctMails.length !== want[SEND_INVOICE_EMAIL].effects) problems.push(`emails sent: ${JSON.stringify(mailIds)}, want ${want[SEND_INVOICE_EMAIL].effects} distinct`);

  // The proxy's recordings: each answered 200; one attempt per try, none
  // for initialize, tools/list or a notification; the effects.
  const posts = cap.entries.filter((e) => e.kind === 'events');
  for (const p of posts) {
    if (p.status !== 200) problems.push(`events request ${p.seq}: status ${p.status}, want 200: ${p.response_body}`);
    if (p.method !== 'POST' || p.path !== '/api/v1/events') problems.push(`events request ${p.seq}: ${p.method} ${p.path}`);
  }
  const events = recordedEvents(cap);
  const attempts = events.filter((e) => e.type === 'attempt');
  const effects = events.filter((e) => e.type === 'effect');
  const types = [...new Set(events.map((e) => e.type))].sort();
  if (attempts.length !== summary.calls_made) problems.push(`${attempts.length} attempts recorded, want ${summary.calls_made}, one per tools/call`);
  for (const a of attempts) {
    if (!TOOLS.includes(a.tool)) problems.push(`attempt ${a.id}: tool ${a.tool}, not one of the server's`);
    if (a.provider !== MCP_PROVIDER) problems.push(`attempt ${a.id}: provider ${a.provider}, want ${MCP_PROVIDER}`);
  }
  const executions = [...new Set([...attempts, ...effects].map((e) => e.execution_id))];
  if (executions.length !== 1) problems.push(`attempts and effects in ${executions.length} executions, want one: ${JSON.stringify(executions)}`);
  const named = events.filter((e) => e.type === 'execution').map((e) => e.name);
  if (!named.includes(CLIENT_NAME)) problems.push(`no execution named ${CLIENT_NAME}: ${JSON.stringify(named)}`);
  const perTool = {};
  for (const tool of TOOLS) {
    const mine = attempts.filter((a) => a.tool === tool).sort((a, b) => (a.started_at < b.started_at ? -1 : 1));
    const outcomes = mine.map((a) => a.outcome);
    if (JSON.stringify(outcomes) !== JSON.stringify(want[tool].outcomes)) problems.push(`${tool}'s attempts: ${JSON.stringify(outcomes)}, want ${JSON.stringify(want[tool].outcomes)}`);
    const steps = new Set(mine.map((a) => a.step_id));
    if (steps.size !== 1) problems.push(`${tool}'s attempts in ${steps.size} steps, want one`);
    const classes = [...new Set(mine.map((a) => a.effect))];
    const wantClass = readOnly(tool) ? 'read' : 'write';
    if (classes.length !== 1 || classes[0] !== wantClass) problems.push(`${tool}'s attempts: class ${JSON.stringify(classes)}, want ${wantClass}`);
    for (const a of mine) {
      if ((a.idempotency_key ?? null) !== (keys[tool] ?? null)) problems.push(`${tool}'s attempt ${a.id}: key ${a.idempotency_key}, want the client's ${keys[tool] ?? 'none'}`);
    }
    const ids = [...new Set(effects.filter((e) => steps.has(e.step_id)).map((e) => e.effect_id))];
    if (ids.length !== want[tool].effects) problems.push(`${tool}'s effects: ${JSON.stringify(ids)}, want ${want[tool].effects}`);
    perTool[tool] = { attempts: outcomes, effects: ids.length };
  }
  const sendStep = attempts.find((a) => a.tool === SEND_INVOICE_EMAIL)?.step_id;
  const sentIds = [...new Set(effects.filter((e) => e.step_id === sendStep).map((e) => e.effect_id))].sort();
  if (JSON.stringify(sentIds) !== JSON.stringify([...distinctMails].sort())) problems.push(`send_invoice_email's effect ids ${JSON.stringify(sentIds)}, want the mail API's ${JSON.stringify(distinctMails)}`);
  return {
    problems,
    facts: { events_requests: posts.length, event_types: types, events: events.length, attempts: attempts.length, effects: effects.length, per_tool: perTool, mails: mails.length },
  };
}

export function summarizeMCP(facts) {
  const tools = Object.entries(facts.per_tool).map(([t, f]) => `${t} [${f.attempts.join(' ')}] ${f.effects} effect${f.effects === 1 ? '' : 's'}`);
  return `  ${facts.events_requests} events requests (${facts.events} events: ${facts.attempts} attempts, ${facts.effects} effects); ${facts.mails} mail requests\n  ${tools.join('; ')}`;
}

// writeMCPRun writes DIR/mcp/<transport>/<run>/ afresh:
//   events-001.json …  each POST /api/v1/events body the proxy sent, byte for byte
//   requests.jsonl     the events and mail requests in arrival order
//   client.json        the client's summary (its tries and what they returned)
//   manifest.json      what ran, with which versions, and what it recorded
export function writeMCPRun(outDir, cap, summary, facts, extra) {
  const dir = path.join(outDir, 'mcp', cap.transport, cap.run);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  let n = 0;
  const lines = cap.entries.map((e) => {
    const { seq, kind, at_ms, method, path: p, headers, status, end_ms, response_body } = e;
    if (kind === 'events') {
      const bodyFile = `events-${String(++n).padStart(3, '0')}.json`;
      fs.writeFileSync(path.join(dir, bodyFile), e.raw);
      return JSON.stringify({ seq, kind, at_ms, method, path: p, content_type: headers['content-type'] ?? '', content_encoding: headers['content-encoding'] ?? '', body_file: bodyFile, status, end_ms, response_body });
    }
    return JSON.stringify({ seq, kind, at_ms, method, path: p, headers, body: e.body, status, end_ms, response_body });
  });
  fs.writeFileSync(path.join(dir, 'requests.jsonl'), lines.join('\n') + '\n');
  fs.writeFileSync(path.join(dir, 'client.json'), JSON.stringify(summary, null, 2) + '\n');
  const { mode, faults } = MCP_RUNS[cap.run];
  const manifest = {
    kind: 'mcp',
    transport: cap.transport,
    run: cap.run,
    proxy: MCP_PROXIES[cap.transport],
    provider: MCP_PROVIDER,
    client_name: CLIENT_NAME,
    server_name: SERVER_NAME,
    mode,
    faults,
    call_timeout_ms: MCP_CALL_TIMEOUT_MS,
    tools: Object.fromEntries(TOOLS.map((t) => [t, ANNOTATIONS[t] ?? null])),
    ...facts,
    ...extra,
    generated_at: new Date().toISOString(),
  };
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
}
