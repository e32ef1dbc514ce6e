// A small decoder of OTLP ExportTraceServiceRequest protobuf, enough for the
// harness to check what each run exported (spans, parents, attributes,
// status). It reads the protobuf wire format directly, so it needs no package.
//   ExportTraceServiceRequest: 1 resource_spans
//   ResourceSpans: 1 resource, 2 scope_spans      Resource: 1 attributes
//   ScopeSpans: 1 scope, 2 spans                  InstrumentationScope: 1 name, 2 version
//   Span: 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind,
//         7 start_time_unix_nano, 8 end_time_unix_nano, 9 attributes,
//         11 events, 15 status                    Status: 2 message, 3 code
//   KeyValue: 1 key, 2 value
//   AnyValue: 1 string, 2 bool, 3 int, 4 double, 5 array{1 values}, 6 kvlist{1 values}, 7 bytes

function* fields(buf) {
  let i = 0;
  const varint = () => {
    let v = 0n;
    let shift = 0n;
    for (;;) {
      const b = buf[i++];
      if (b === undefined) throw new Error('truncated varint');
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const tag = Number(varint());
    const no = tag >>> 3;
    const wt = tag & 7;
    if (wt === 0) yield [no, varint()];
    else if (wt === 1) { yield [no, buf.subarray(i, i + 8)]; i += 8; }
    else if (wt === 2) { const n = Number(varint()); yield [no, buf.subarray(i, i + n)]; i += n; }
    else if (wt === 5) { yield [no, buf.subarray(i, i + 4)]; i += 4; }
    else throw new Error(`wire type ${wt} unsupported`);
    if (i > buf.length) throw new Error('truncated field');
  }
}

const str = (b) => Buffer.from(b).toString('utf8');
const hex = (b) => Buffer.from(b).toString('hex');
const u64 = (b) => Buffer.from(b).readBigUInt64LE(0);

function anyValue(buf) {
  for (const [no, v] of fields(buf)) {
    switch (no) {
      case 1: return str(v);
      case 2: return v !== 0n;
      case 3: return BigInt.asIntN(64, v) <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(BigInt.asIntN(64, v)) : BigInt.asIntN(64, v).toString();
      case 4: return Buffer.from(v).readDoubleLE(0);
      case 5: return [...fields(v)].filter(([n]) => n === 1).map(([, x]) => anyValue(x));
      case 6: return attributes([...fields(v)].filter(([n]) => n === 1).map(([, x]) => x));
      case 7: return hex(v);
    }
  }
  return null;
}

function attributes(kvs) {
  const out = {};
  for (const kv of kvs) {
    let key = '';
    let value = null;
    for (const [no, v] of fields(kv)) {
      if (no === 1) key = str(v);
      else if (no === 2) value = anyValue(v);
    }
    out[key] = value;
  }
  return out;
}

function span(buf, resource, scope) {
  const s = { traceId: '', spanId: '', parentSpanId: '', name: '', kind: 0, start: 0n, end: 0n, attributes: {}, events: [], status: { code: 0, message: '' }, resource, scope };
  const attrs = [];
  for (const [no, v] of fields(buf)) {
    switch (no) {
      case 1: s.traceId = hex(v); break;
      case 2: s.spanId = hex(v); break;
      case 4: s.parentSpanId = hex(v); break;
      case 5: s.name = str(v); break;
      case 6: s.kind = Number(v); break;
      case 7: s.start = u64(v); break;
      case 8: s.end = u64(v); break;
      case 9: attrs.push(v); break;
      case 11: {
        const ev = { name: '', attributes: {} };
        const evAttrs = [];
        for (const [n, x] of fields(v)) {
          if (n === 2) ev.name = str(x);
          else if (n === 3) evAttrs.push(x);
        }
        ev.attributes = attributes(evAttrs);
        s.events.push(ev);
        break;
      }
      case 15:
        for (const [n, x] of fields(v)) {
          if (n === 2) s.status.message = str(x);
          else if (n === 3) s.status.code = Number(x);
        }
        break;
    }
  }
  s.attributes = attributes(attrs);
  return s;
}

// decodeTraces returns the spans of one export request body.
export function decodeTraces(body) {
  const spans = [];
  for (const [no, rs] of fields(body)) {
    if (no !== 1) continue;
    let resource = {};
    const scopeSpans = [];
    for (const [n, v] of fields(rs)) {
      if (n === 1) resource = attributes([...fields(v)].filter(([k]) => k === 1).map(([, x]) => x));
      else if (n === 2) scopeSpans.push(v);
    }
    for (const ss of scopeSpans) {
      const scope = { name: '', version: '' };
      const raw = [];
      for (const [n, v] of fields(ss)) {
        if (n === 1) {
          for (const [k, x] of fields(v)) {
            if (k === 1) scope.name = str(x);
            else if (k === 2) scope.version = str(x);
          }
        } else if (n === 2) raw.push(v);
      }
      for (const r of raw) spans.push(span(r, resource, scope));
    }
  }
  return spans;
}

export const SPAN_KIND = ['UNSPECIFIED', 'INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'];
