package storage

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/storage/s3test"
)

// clock is a settable clock shared by the "processes" of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// process opens a fresh FS (another query process) on the location, with
// the given lease TTL and clock.
func process(t *testing.T, s s3test.Server, prefix string, ttl time.Duration, c *clock) (*bucketFS, string) {
	t.Helper()
	loc, err := Parse("--checkpoint", s.Location(prefix))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := NewFS(context.Background(), vfs.NewMem(), loc)
	if err != nil {
		t.Fatal(err)
	}
	b := fs.(*Mux).buckets[loc.S3.Bucket]
	b.leaseTTL, b.now = ttl, c.now
	return b, loc.Path
}

func TestLease(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		c := &clock{t: time.Unix(1_700_000_000, 0)}
		const ttl = time.Hour // renewals never run on their own in this test
		a, root := process(t, s, "q1/ck", ttl, c)
		b, _ := process(t, s, "q1/ck", ttl, c)
		lockPath := a.PathJoin(root, ".lock")

		la, err := a.Lock(lockPath)
		if err != nil {
			t.Fatal(err)
		}
		// A second query is CHECKPOINT_LOCKED, before and near the expiry.
		if _, err := b.Lock(lockPath); !errcode.Is(err, errcode.CheckpointLocked) {
			t.Fatalf("second lock = %v, want CHECKPOINT_LOCKED", err)
		}
		c.add(ttl - time.Second)
		if _, err := b.Lock(lockPath); !errcode.Is(err, errcode.CheckpointLocked) {
			t.Fatalf("lock before the expiry = %v, want CHECKPOINT_LOCKED", err)
		}
		// A renewal moves the expiry.
		if err := la.(*lease).renewOnce(); err != nil {
			t.Fatal(err)
		}
		c.add(2 * time.Second)
		if _, err := b.Lock(lockPath); !errcode.Is(err, errcode.CheckpointLocked) {
			t.Fatalf("lock after a renewal = %v, want CHECKPOINT_LOCKED", err)
		}
		if err := la.Close(); err != nil {
			t.Fatal(err)
		}
		// Released: the next query takes it at once.
		lb, err := b.Lock(lockPath)
		if err != nil {
			t.Fatalf("lock after release: %v", err)
		}
		if err := lb.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLeaseOfACrashedHolder: a holder that stops renewing (a crash) keeps
// others out until its lease expires; then one taker wins, and the old
// holder, if it comes back, can no longer write under the checkpoint.
func TestLeaseOfACrashedHolder(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		c := &clock{t: time.Unix(1_700_000_000, 0)}
		const ttl = time.Hour
		a, root := process(t, s, "q1/ck", ttl, c)
		lockPath := a.PathJoin(root, ".lock")
		la, err := a.Lock(lockPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := durable.Bytes(a, a.PathJoin(root, "offsets"), "0", durable.Options{}, []byte("x")); err != nil {
			t.Fatal(err)
		}
		c.add(ttl + time.Second) // a "crashed": no renewal
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for range 4 {
			p, _ := process(t, s, "q1/ck", ttl, c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := p.Lock(lockPath)
				if err == nil {
					mu.Lock()
					won++
					mu.Unlock()
					t.Cleanup(func() { l.Close() })
				} else if !errcode.Is(err, errcode.CheckpointLocked) {
					t.Errorf("taker: %v", err)
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d takers won the expired lease, want 1", won)
		}
		// The old holder finds out: its writes are refused, its renewal too.
		_, err = durable.Bytes(a, a.PathJoin(root, "offsets"), "1", durable.Options{}, []byte("x"))
		if !errcode.Is(err, errcode.CheckpointLocked) {
			t.Fatalf("write of the expired holder = %v, want CHECKPOINT_LOCKED", err)
		}
		if err := la.(*lease).renewOnce(); !errcode.Is(err, errcode.CheckpointLocked) {
			t.Fatalf("renewal after a takeover = %v, want CHECKPOINT_LOCKED", err)
		}
		la.Close()
		if _, err := a.Stat(a.PathJoin(root, "offsets", "1")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the fenced write reached the store: %v", err)
		}
	})
}

// TestLeaseKeepsThePreviousGeneration: a take deletes the generations below
// the one it succeeded and keeps that one (doc.go, Lease protocol), so that
// a listing running while the next take creates G+1 and deletes G-1 still
// shows a generation; no number is ever taken twice.
func TestLeaseKeepsThePreviousGeneration(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		c := &clock{t: time.Unix(1_700_000_000, 0)}
		a, root := process(t, s, "q1/ck", time.Hour, c)
		lockPath := a.PathJoin(root, ".lock")
		dir := a.key(lockPath)
		gens := func() []string {
			t.Helper()
			keys, err := a.listKeys(dir+"/", "")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, k := range keys {
				names = append(names, k[len(dir)+1:])
			}
			return names
		}
		want := [][]string{{genName(0)}, {genName(0), genName(1)}, {genName(1), genName(2)}, {genName(2), genName(3)}}
		for i, w := range want {
			l, err := a.Lock(lockPath)
			if err != nil {
				t.Fatal(err)
			}
			if got := gens(); !slices.Equal(got, w) {
				t.Fatalf("take %d: generations %v, want %v", i, got, w)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
