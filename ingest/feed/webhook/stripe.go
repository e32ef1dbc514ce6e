package webhook

// stripeEvent is how one Stripe event type names its effect when no API
// request caused it. Paths are under data.object, the object the event is
// about.
type stripeEvent struct {
	// id: the first present path is the effect id.
	id []string
	// eventID: the effect is the event itself (evt_...): each invoice.sent
	// is one email, however often the same invoice is sent.
	eventID bool
	target  []string
	// optional: a payload without an id is ignored rather than refused.
	optional bool
}

// stripeEvents are the Stripe event types that record a side effect; every
// other type is answered 200 and ignored.
//
// An effect is what one API request did: an event caused by a request
// (request.id, req_...) is identified by that request, so the events of
// one request — charge.succeeded and payment_intent.succeeded of a
// payment, customer.subscription.created and the first invoice.paid of a
// subscription, refund.created and charge.refunded — are one effect of
// its key, never a duplicate. Two requests are two effects, whatever
// their keys: that is the duplicate the audit looks for.
//
// Events no request caused (a renewal, an asynchronous payment, a payout)
// are identified by their object, a payment by its PaymentIntent so that
// its charge, intent and invoice events are still one effect.
var stripeEvents = map[string]stripeEvent{
	"charge.succeeded":              {id: []string{"payment_intent", "id"}, target: []string{"customer", "receipt_email", "billing_details.email"}},
	"payment_intent.succeeded":      {id: []string{"id"}, target: []string{"customer", "receipt_email"}},
	"invoice.paid":                  {id: []string{"payment_intent", "payments.data.0.payment.payment_intent", "id"}, target: []string{"customer", "customer_email"}},
	"invoice.sent":                  {eventID: true, target: []string{"customer", "customer_email"}},
	"refund.created":                {id: []string{"id"}, target: []string{"charge"}},
	"charge.refunded":               {id: []string{"refunds.data.0.id"}, target: []string{"id"}, optional: true}, // the object is the refunded charge
	"payout.paid":                   {id: []string{"id"}, target: []string{"destination"}},
	"transfer.created":              {id: []string{"id"}, target: []string{"destination"}},
	"customer.created":              {id: []string{"id"}, target: []string{"email"}},
	"customer.subscription.created": {id: []string{"id"}, target: []string{"customer"}},
}

// stripeFields are the paths of each event type's effect, built once.
var stripeFields = func() map[string]*fields {
	under := func(paths []string) []string {
		out := make([]string, len(paths))
		for i, p := range paths {
			out[i] = "data.object." + p
		}
		return out
	}
	all := map[string]*fields{}
	for typ, ev := range stripeEvents {
		id := under(ev.id)
		if ev.eventID {
			id = []string{"id"}
		}
		all[typ] = &fields{
			effectID:    mustField(append([]string{"request.id"}, id...)...),
			key:         mustField("request.idempotency_key"),
			target:      mustField(under(ev.target)...),
			at:          mustField("created"),
			atFormat:    timeUnix,
			executionID: mustField("data.object.metadata.execution_id"),
			stepID:      mustField("data.object.metadata.step_id"),
			traceparent: mustField("data.object.metadata.traceparent"),
			required:    []string{"at"},
		}
	}
	return all
}()

func stripeMapping() Mapping {
	return Mapping{
		Provider: "stripe",
		Description: "Stripe events that record a side effect (charges, payment intents, refunds, payouts, transfers, invoices, customers, subscriptions); " +
			"the key is the idempotency key of the request that caused the event",
		Signature: Signature{Scheme: SchemeStripe},
		read:      readStripe,
	}
}

func readStripe(payload any) (Result, error) {
	root := item{v: payload}
	typeField := mustField("type")
	typ, _, ok, err := root.text(typeField)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{}, &FieldError{Path: "type", Problem: "missing; a Stripe event names its type"}
	}
	var res Result
	f, known := stripeFields[typ]
	if !known {
		res.ignore(typ)
		return res, nil
	}
	if stripeEvents[typ].optional {
		if _, _, present, err := root.text(f.effectID); err == nil && !present {
			// charge.refunded no request caused lists its refunds only in API
			// versions before 2022-11-15; refund.created records the refund.
			res.ignore(typ + " without data.object.refunds")
			return res, nil
		}
	}
	e, err := f.effect("stripe", root)
	if err != nil {
		return Result{}, err
	}
	res.Effects = []Effect{e}
	return res, nil
}
