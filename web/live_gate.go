package web

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Delivering every event to a thousand clients costs many times what
// storing it costs: the bytes are copied a thousand times. Encoding once
// and writing in batches makes each copy cheap, but the copies still
// compete with ingest for the CPUs, and a thousand runnable connection
// goroutines would queue the writer and the request handlers behind them
// in the scheduler. So delivery passes a gate:
//
//   - at most half the CPUs' worth of connections read back, encode and
//     gather frames at once (one on a 2-CPU machine); the others wait, off
//     the run queue;
//   - while the ingest writer is busy (committing more than
//     liveWriterBusy of the time, over the last liveBusyWindow or so), the
//     time connections spend in the gate and writing is held to
//     liveDeliveryShare of the CPUs; connections that fall further behind
//     than their buffer are dropped, as always, and resume later from the
//     hub's recent messages or the store.
//
// When the writer has time to spare, delivery runs as fast as the gate's
// slots allow, so clients stay current and catch up. Time is measured on
// the wall clock, which a busy machine stretches: delivery then gets less,
// never more, than its share.

const (
	// liveDeliveryShare is the share of the CPUs live delivery may use
	// while the writer is busy.
	liveDeliveryShare = 0.125
	// liveWriterBusy is the share of its time the writer spends
	// committing above which it counts as busy, measured over about
	// liveBusyWindow (a moving average).
	liveWriterBusy = 0.7
	liveBusyWindow = 250 * time.Millisecond
	// liveBurst is how much unused delivery time may be saved up, and how
	// far into debt delivery may go, in CPU time.
	liveBurst = 20 * time.Millisecond
	// liveBlockedWrite caps what one write is charged: a write that takes
	// longer is waiting for the client, not using a CPU.
	liveBlockedWrite = 2 * time.Millisecond
)

type deliveryGate struct {
	slots      chan struct{}
	share      float64     // CPU time a second of wall clock allows, while the writer is busy
	throttling atomic.Bool // the writer is busy: delivery keeps to its share

	mu       sync.Mutex
	busy     float64   // the writer's share of time committing, a moving average
	busyAt   time.Time // when busy was last brought up to date
	credit   time.Duration
	creditAt time.Time // when credit was last topped up
}

func newDeliveryGate() *deliveryGate {
	cpus := runtime.GOMAXPROCS(0)
	now := time.Now()
	return &deliveryGate{
		slots:  make(chan struct{}, max(1, cpus/2)),
		share:  liveDeliveryShare * float64(cpus),
		busyAt: now, creditAt: now,
	}
}

// committed notes a transaction of the writer that took took.
func (g *deliveryGate) committed(took time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.decayLocked(time.Now())
	g.busy += float64(took) / float64(liveBusyWindow)
	g.throttling.Store(g.busy >= liveWriterBusy)
}

// refresh lets the writer's busy share fade when nothing is committed.
func (g *deliveryGate) refresh(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.decayLocked(now)
	g.throttling.Store(g.busy >= liveWriterBusy)
}

// decayLocked brings the moving average of the writer's busy share to
// now: it fades with time as exp(-t/liveBusyWindow), and each commit adds
// its duration over the window, so a writer always committing settles at 1.
func (g *deliveryGate) decayLocked(now time.Time) {
	if d := now.Sub(g.busyAt); d > 0 {
		g.busy *= math.Exp(-float64(d) / float64(liveBusyWindow))
		g.busyAt = now
	}
}

// enter takes a slot, then, while the writer is busy, waits until
// delivery has time left. It returns when it did so, the time the unit is
// charged from; zero when the writer is not busy and nothing is charged.
func (g *deliveryGate) enter() time.Time {
	g.slots <- struct{}{}
	for g.throttling.Load() {
		now := time.Now()
		g.mu.Lock()
		g.credit = min(liveBurst, g.credit+time.Duration(float64(now.Sub(g.creditAt))*g.share))
		g.creditAt = now
		owed := -g.credit
		g.mu.Unlock()
		if owed < 0 {
			return now
		}
		// Wait holding the slot: the other connections wait for it, off
		// the run queue, while ingest has the CPUs.
		time.Sleep(time.Duration(float64(owed)/g.share) + time.Millisecond)
	}
	return time.Time{}
}

// leave gives the slot back.
func (g *deliveryGate) leave() { <-g.slots }

// charge counts d of delivery time against the share.
func (g *deliveryGate) charge(d time.Duration) {
	g.mu.Lock()
	g.credit = max(-liveBurst, g.credit-d)
	g.mu.Unlock()
}
