// A bridge from the OpenAI Agents SDK's tracing to OpenTelemetry, the kind a
// user writes: @openai/agents has no OTel export of its own (its spans go to
// OpenAI's trace ingest unless another TracingProcessor replaces it).
//
// Mapping, after the OTel GenAI semantic conventions:
//   agent span          → "invoke_agent <name>"  gen_ai.operation.name=invoke_agent, gen_ai.agent.name
//   function span       → "execute_tool <name>"  gen_ai.operation.name=execute_tool, gen_ai.tool.name,
//                          gen_ai.tool.call.id, gen_ai.tool.call.arguments, gen_ai.tool.call.result;
//                          on error status ERROR and error.type
//   generation/response → "chat <model>"         gen_ai.operation.name=chat, gen_ai.request.model,
//                          gen_ai.usage.input_tokens / output_tokens
// Other spans (task, turn, …) are not exported: their children hang from the
// nearest exported ancestor.
//
// The SDK runs tools and model calls outside any OTel context. bind() runs a
// function inside the OTel context of the Agents span current at the call,
// so the tool's fetch (and the OpenAI client's, through its fetch option)
// gets an HTTP client span that is a child of the tool (or chat) span.
import { context, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { getCurrentSpan } from '@openai/agents';

export class OTelBridgeProcessor {
  constructor(tracer) {
    this.tracer = tracer;
    this.entries = new Map(); // Agents span id → { span?, ctx, errorType? }
  }

  contextOf(agentsSpanId) {
    return (agentsSpanId && this.entries.get(agentsSpanId)?.ctx) || context.active();
  }

  // bind runs fn in the OTel context of the current Agents span. Inside a
  // tool it also records the thrown error's type on the tool span.
  bind(fn) {
    const bridge = this;
    return function bound(...args) {
      const entry = bridge.entries.get(getCurrentSpan()?.spanId);
      if (!entry) return fn.apply(this, args);
      return context.with(entry.ctx, async () => {
        try {
          return await fn.apply(this, args);
        } catch (err) {
          if (entry.span) {
            entry.errorType = err?.name || err?.constructor?.name || '_OTHER';
            entry.span.recordException(err);
          }
          throw err;
        }
      });
    };
  }

  // tool wraps a tool's execute: its code runs inside the tool span, which
  // also learns the call id the model gave.
  tool(execute) {
    const bridge = this;
    const bound = this.bind(execute);
    return function (input, runContext, details) {
      const entry = bridge.entries.get(getCurrentSpan()?.spanId);
      const callId = details?.toolCall?.callId;
      if (entry?.span && callId) entry.span.setAttribute('gen_ai.tool.call.id', callId);
      return bound(input, runContext, details);
    };
  }

  async onTraceStart() {}
  async onTraceEnd() {}

  async onSpanStart(span) {
    const d = span.spanData;
    const parent = this.contextOf(span.parentId);
    let name;
    let kind = SpanKind.INTERNAL;
    const attributes = {};
    switch (d.type) {
      case 'agent':
        name = `invoke_agent ${d.name}`;
        attributes['gen_ai.operation.name'] = 'invoke_agent';
        attributes['gen_ai.agent.name'] = d.name;
        break;
      case 'function':
        name = `execute_tool ${d.name}`;
        attributes['gen_ai.operation.name'] = 'execute_tool';
        attributes['gen_ai.tool.name'] = d.name;
        attributes['gen_ai.tool.type'] = 'function';
        break;
      case 'generation':
      case 'response':
        name = 'chat';
        kind = SpanKind.CLIENT;
        attributes['gen_ai.operation.name'] = 'chat';
        attributes['gen_ai.provider.name'] = 'openai';
        if (d.model) attributes['gen_ai.request.model'] = d.model;
        break;
      default:
        this.entries.set(span.spanId, { ctx: parent });
        return;
    }
    const otel = this.tracer.startSpan(name, { kind, attributes }, parent);
    this.entries.set(span.spanId, { span: otel, ctx: trace.setSpan(parent, otel) });
  }

  async onSpanEnd(span) {
    const entry = this.entries.get(span.spanId);
    if (!entry?.span) return;
    const otel = entry.span;
    const d = span.spanData;
    if (d.type === 'function') {
      if (d.input != null) otel.setAttribute('gen_ai.tool.call.arguments', String(d.input));
      if (d.output != null) otel.setAttribute('gen_ai.tool.call.result', String(d.output));
    } else if (d.type === 'generation') {
      if (d.model) otel.updateName(`chat ${d.model}`);
      setUsage(otel, d.usage?.input_tokens, d.usage?.output_tokens);
    } else if (d.type === 'response') {
      // A response span carries the whole Responses API answer (when the run
      // may trace data), not the request: its model is the one answering.
      const r = d._response;
      if (r?.model) {
        otel.setAttribute('gen_ai.request.model', r.model);
        otel.setAttribute('gen_ai.response.model', r.model);
        otel.updateName(`chat ${r.model}`);
      }
      if (d.response_id || r?.id) otel.setAttribute('gen_ai.response.id', d.response_id || r.id);
      setUsage(otel, r?.usage?.input_tokens, r?.usage?.output_tokens);
    }
    if (span.error) {
      otel.setAttribute('error.type', entry.errorType || '_OTHER');
      otel.setStatus({ code: SpanStatusCode.ERROR, message: span.error.message });
    }
    otel.end();
    // The entry stays: a later span may still name this one as its parent.
  }

  async shutdown() {}
  async forceFlush() {}
}

function setUsage(otel, input, output) {
  if (typeof input === 'number') otel.setAttribute('gen_ai.usage.input_tokens', input);
  if (typeof output === 'number') otel.setAttribute('gen_ai.usage.output_tokens', output);
}
