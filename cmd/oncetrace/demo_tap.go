package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
)

// demoTap is the recording proxy of `demo --via tap`: the agent sends its
// emails to it, it injects the lost response and records each email, and
// the sandbox behind it delivers them.
//
// The sandbox records every email it delivers as well, so the tap records
// under the sandbox's own provider: the tap and the sandbox report one
// email by one effect identity (provider sandbox-mail, the message id), as
// two feeds watching one provider do, and the email is one effect with two
// events in the log (tap:sandbox-mail:msg_… and sandbox:sandbox-mail:msg_…).
// Under a provider of its own the tap's report would be a second effect
// of the same step, and a clean run would look like a duplicate.
type demoTap struct {
	*runningTap
	dir string
	out func(format string, args ...any)
}

// startDemoTap starts the tap when o.via is "tap"; nil otherwise. Every
// method of a nil *demoTap does nothing.
func startDemoTap(o demoOptions) (*demoTap, error) {
	if o.via != "tap" {
		return nil, nil
	}
	dir, err := os.MkdirTemp("", "oncetrace-demo-tap-")
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	opts := tapOptions{listen: "127.0.0.1:0", upstream: o.server, provider: sandbox.Provider, unsafeMethods: tap.DefaultUnsafeMethods,
		keyHeaders: tap.DefaultKeyHeaders, queueDir: dir, maxPeekBytes: tap.DefaultMaxPeekBytes, recordTimeout: 5 * time.Second,
		limits: defaultTapLimits}
	// Only trouble is worth a line among the demo's own.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := launchTap(opts, feed.HTTPRecorder{Server: o.server, Token: o.token, Feed: tap.Feed}, ingest.DefaultLimits, logger)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("demo: --via tap: %w", err)
	}
	t := &demoTap{runningTap: r, dir: dir, out: func(format string, args ...any) { fmt.Fprintf(o.out, format, args...) }}
	t.out("demo: the agent sends its emails through oncetrace tap at %s, in front of %s%s; the tap loses the responses\n", r.url, o.server, sandboxSendPath)
	return t, nil
}

// settle waits, up to 10 s, until no effect of the tap waits in its queue,
// so that the audit read next sees every email the tap saw.
func (t *demoTap) settle(ctx context.Context) {
	if t == nil {
		return
	}
	for deadline := time.Now().Add(10 * time.Second); t.counts().Queued > 0 && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// report prints what the tap did.
func (t *demoTap) report() {
	if t == nil {
		return
	}
	s := t.tap.Status()
	t.out("demo: the tap forwarded %d requests, lost %d responses on purpose, and recorded %d emails (%d failed attempts, %d queued, %d dropped, %d rejected)\n",
		s.Proxied, s.Faults[string(sandbox.LoseResponse)], s.Recorded, s.Failed, s.Queued, s.Dropped, s.Rejected)
}

// stop stops the tap and removes its queue.
func (t *demoTap) stop() {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t.runningTap.stop(ctx)
	os.RemoveAll(t.dir)
}
