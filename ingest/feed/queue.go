package feed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/oncetrace/oncetrace/trace"
)

// DefaultQueueBytes is the queue's cap when none is given: about 50,000
// effects of a few hundred bytes each.
const DefaultQueueBytes = 16 << 20

// Queue is the disk queue of effects (QueuedRecorder's); each file is one
// trace.Effect's JSON, as before the queue held anything else.
type Queue = DiskQueue[trace.Effect]

// OpenQueue opens the queue of effects in dir; see OpenDiskQueue.
func OpenQueue(dir string, maxBytes int64) (*Queue, error) {
	return OpenDiskQueue[trace.Effect](dir, maxBytes)
}

// DiskQueue is a bounded first-in, first-out queue of items on disk: a
// directory with one JSON file per item, named by its sequence number,
// each written to a temporary file, synced and renamed, so a crash leaves
// whole items or none. It survives restarts: opening the directory again
// finds what was left. When a new item would take it past its cap, the
// oldest are dropped and counted. One process at a time may hold a
// directory (an advisory lock). A directory holds one type of item: a file
// that does not decode as T is dropped and counted like a damaged one.
type DiskQueue[T any] struct {
	dir      string
	maxBytes int64
	lock     *os.File

	mu      sync.Mutex
	items   []queueItem // oldest first
	bytes   int64
	next    uint64
	dropped int64
}

type queueItem struct {
	seq  uint64
	size int64
}

const queueExt = ".json"

// OpenDiskQueue opens (creating it if needed) the queue in dir, capped at
// maxBytes of item files; DefaultQueueBytes when maxBytes ≤ 0.
func OpenDiskQueue[T any](dir string, maxBytes int64) (*DiskQueue[T], error) {
	if maxBytes <= 0 {
		maxBytes = DefaultQueueBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("feed: queue: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("feed: queue: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("feed: queue %s is in use by another process: %w", dir, err)
	}
	q := &DiskQueue[T]{dir: dir, maxBytes: maxBytes, lock: lock, next: 1}
	entries, err := os.ReadDir(dir)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("feed: queue: %w", err)
	}
	for _, ent := range entries {
		name := ent.Name()
		if strings.HasPrefix(name, ".tmp-") {
			os.Remove(filepath.Join(dir, name)) // a write a crash cut short
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(name, queueExt), 10, 64)
		if err != nil || !strings.HasSuffix(name, queueExt) || !ent.Type().IsRegular() {
			continue
		}
		info, err := ent.Info()
		if err != nil {
			continue
		}
		q.items = append(q.items, queueItem{seq: seq, size: info.Size()})
		q.bytes += info.Size()
		q.next = max(q.next, seq+1)
	}
	sort.Slice(q.items, func(i, j int) bool { return q.items[i].seq < q.items[j].seq })
	return q, nil
}

// Close releases the directory; the items in it stay for the next open.
func (q *DiskQueue[T]) Close() error {
	return q.lock.Close()
}

// Dir is the queue's directory.
func (q *DiskQueue[T]) Dir() string { return q.dir }

func (q *DiskQueue[T]) path(seq uint64) string {
	return filepath.Join(q.dir, fmt.Sprintf("%020d%s", seq, queueExt))
}

// Push appends an item, dropping the oldest items while the queue would
// exceed its cap. It returns how many it dropped.
func (q *DiskQueue[T]) Push(item T) (dropped int, err error) {
	data, err := json.Marshal(item)
	if err != nil {
		return 0, fmt.Errorf("feed: queue: %w", err)
	}
	size := int64(len(data))
	if size > q.maxBytes {
		return 0, fmt.Errorf("feed: queue: an item of %d bytes is over the queue's cap of %d bytes", size, q.maxBytes)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) > 0 && q.bytes+size > q.maxBytes {
		oldest := q.items[0]
		if err := os.Remove(q.path(oldest.seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return dropped, fmt.Errorf("feed: queue: drop the oldest: %w", err)
		}
		q.items = q.items[1:]
		q.bytes -= oldest.size
		q.dropped++
		dropped++
	}
	seq := q.next
	if err := writeFileAtomic(q.dir, q.path(seq), data); err != nil {
		return dropped, fmt.Errorf("feed: queue: %w", err)
	}
	q.next++
	q.items = append(q.items, queueItem{seq: seq, size: size})
	q.bytes += size
	return dropped, nil
}

// Oldest returns the oldest item and its sequence number, for Remove. An
// item file that cannot be read back is dropped and counted, and the next
// one returned.
func (q *DiskQueue[T]) Oldest() (seq uint64, item T, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) > 0 {
		it := q.items[0]
		data, err := os.ReadFile(q.path(it.seq))
		if err == nil {
			var got T
			if err = json.Unmarshal(data, &got); err == nil {
				return it.seq, got, true
			}
		}
		os.Remove(q.path(it.seq))
		q.items = q.items[1:]
		q.bytes -= it.size
		q.dropped++
	}
	var none T
	return 0, none, false
}

// Remove deletes the item with this sequence number, if it is still
// queued (a full queue may have dropped it meanwhile).
func (q *DiskQueue[T]) Remove(seq uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, it := range q.items {
		if it.seq != seq {
			continue
		}
		if err := os.Remove(q.path(seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("feed: queue: %w", err)
		}
		q.items = append(q.items[:i], q.items[i+1:]...)
		q.bytes -= it.size
		return nil
	}
	return nil
}

// Len is the number of items queued.
func (q *DiskQueue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// Bytes is the size of the items queued.
func (q *DiskQueue[T]) Bytes() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}

// Dropped is how many items the queue has dropped since it was opened:
// pushed out by newer ones when full, or unreadable. (An item too large to
// keep is refused by Push with an error, not counted here.)
func (q *DiskQueue[T]) Dropped() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// writeFileAtomic writes data to path through a synced temporary file in
// dir, renamed into place, then syncs dir so the rename is durable.
func writeFileAtomic(dir, path string, data []byte) error {
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
