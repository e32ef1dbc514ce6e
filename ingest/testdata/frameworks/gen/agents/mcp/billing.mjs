// What the MCP server (server.mjs) and its client agent loop (client.mjs)
// agree on: the tools, the invoice the agent works on, and the `_meta` names
// oncetrace reads (issue 25's design).

export const SERVER_NAME = 'billing-tools';
export const CLIENT_NAME = 'billing-agent';
export const VERSION = '1.0.0';

export const SEND_INVOICE_EMAIL = 'send_invoice_email';
export const GET_INVOICE = 'get_invoice';
export const CHARGE_CARD = 'charge_card';
export const TOOLS = Object.freeze([GET_INVOICE, SEND_INVOICE_EMAIL, CHARGE_CARD]);

// The annotations each tool is listed with: oncetrace classes a tool by them
// (readOnlyHint → read, idempotentHint → a write safe to repeat, none → write).
export const ANNOTATIONS = Object.freeze({
  [SEND_INVOICE_EMAIL]: undefined,
  [GET_INVOICE]: Object.freeze({ readOnlyHint: true }),
  [CHARGE_CARD]: Object.freeze({ idempotentHint: true }),
});

// META_KEY carries a client's idempotency key in params._meta; META_FAULT
// asks the recording proxy for a fault on this one tools/call.
export const META_KEY = 'io.oncetrace/idempotency-key';
export const META_FAULT = 'io.oncetrace/fault';

export const INVOICES = Object.freeze({
  'INV-0612': Object.freeze({ id: 'INV-0612', customer: 'cus_jordan', email: 'jordan@acme.dev', amount: 4200, currency: 'usd', status: 'open' }),
});
export const INVOICE_ID = 'INV-0612';
