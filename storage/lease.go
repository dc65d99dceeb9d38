package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
)

// DefaultLeaseTTL is how long a checkpoint lease lasts without renewal.
const DefaultLeaseTTL = 30 * time.Second

// leaseFormat is the version of the lease object (doc.go).
const leaseFormat = 1

// leaseBody is the JSON content of one lease generation (doc.go).
type leaseBody struct {
	Version  int    `json:"version"`
	Owner    string `json:"owner"`
	Expires  int64  `json:"expiresMs"` // Unix milliseconds
	TTL      int64  `json:"ttlMs"`
	Released bool   `json:"released"`
}

// lease is a held checkpoint lease (doc.go, Lease protocol).
type lease struct {
	fs    *bucketFS
	root  string // key of the checkpoint: publishes under root/ are fenced
	dir   string // key of the lease directory (<root>/.lock)
	gen   int64
	owner string

	mu      sync.Mutex
	expires time.Time
	lost    error

	stop chan struct{}
	done chan struct{}
}

func genName(g int64) string { return fmt.Sprintf("%020d", g) }

func (b *bucketFS) readLease(key string) (leaseBody, error) {
	data, err := b.readAll(key)
	if err != nil {
		return leaseBody{}, err
	}
	var l leaseBody
	if err := json.Unmarshal(data, &l); err != nil || l.Version != leaseFormat || l.Owner == "" {
		return leaseBody{}, errcode.Corrupt(b.path(key), err, "not a checkpoint lease of format %d", leaseFormat)
	}
	return l, nil
}

func lockedError(root, owner string, until time.Time) error {
	return errcode.New(errcode.CheckpointLocked, root,
		"stop the other query using this checkpoint, or wait until its lease expires (a crashed query's lease expires by itself)",
		"another query (%s) holds the checkpoint lease until %s", owner, until.UTC().Format(time.RFC3339))
}

// Lock takes the lease of the checkpoint whose lock path is name
// (<checkpoint>/.lock), renewing it until Close.
func (b *bucketFS) Lock(name string) (io.Closer, error) {
	dir := b.key(name)
	root := path.Dir("/" + dir)[1:]
	keys, err := b.listKeys(dir+"/", "")
	if err != nil {
		return nil, err
	}
	gen := int64(-1)
	var old []string
	for _, k := range keys {
		g, err := strconv.ParseInt(path.Base(k), 10, 64)
		if err != nil || genName(g) != path.Base(k) {
			continue
		}
		old = append(old, k)
		gen = max(gen, g)
	}
	now := b.now()
	if gen >= 0 {
		cur, err := b.readLease(dir + "/" + genName(gen))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if err == nil && !cur.Released && now.Before(time.UnixMilli(cur.Expires)) {
			return nil, lockedError(b.path(root), cur.Owner, time.UnixMilli(cur.Expires))
		}
	}
	host, _ := os.Hostname()
	l := &lease{fs: b, root: root, dir: dir, gen: gen + 1,
		owner: fmt.Sprintf("%s:%d:%d", host, os.Getpid(), now.UnixNano()),
		stop:  make(chan struct{}), done: make(chan struct{})}
	expires := now.Add(b.leaseTTL)
	if err := b.put(l.key(), l.body(expires, false), true); err != nil {
		if errors.Is(err, durable.ErrExists) {
			return nil, lockedError(b.path(root), "a query that started at the same time", expires)
		}
		return nil, err
	}
	l.expires = expires
	// Older generations are expired or released: drop them (best effort,
	// the highest generation alone decides), but the one this take
	// succeeded, which a concurrent listing must still see (doc.go).
	for _, k := range old {
		if k != dir+"/"+genName(gen) {
			_ = b.Remove(b.path(k))
		}
	}
	b.mu.Lock()
	b.leases[root] = l
	b.mu.Unlock()
	go l.renew()
	return l, nil
}

func (l *lease) key() string { return l.dir + "/" + genName(l.gen) }

func (l *lease) body(expires time.Time, released bool) []byte {
	b, _ := json.Marshal(leaseBody{Version: leaseFormat, Owner: l.owner, Expires: expires.UnixMilli(),
		TTL: l.fs.leaseTTL.Milliseconds(), Released: released})
	return b
}

// renew extends the lease every TTL/3 until Close, and marks it lost when a
// newer generation exists or it expired without a successful renewal.
func (l *lease) renew() {
	defer close(l.done)
	t := time.NewTicker(l.fs.leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if err := l.renewOnce(); err != nil {
			l.mu.Lock()
			if l.lost == nil && (errcode.Is(err, errcode.CheckpointLocked) || !l.fs.now().Before(l.expires)) {
				l.lost = err
			}
			l.mu.Unlock()
		}
	}
}

func (l *lease) renewOnce() error {
	next := l.fs.path(l.dir + "/" + genName(l.gen+1))
	if _, err := l.fs.Stat(next); err == nil {
		return errcode.New(errcode.CheckpointLocked, l.fs.path(l.root), "restart the query once the other one stopped",
			"the checkpoint lease was taken over by another query (%s exists)", next)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	expires := l.fs.now().Add(l.fs.leaseTTL)
	if err := l.fs.put(l.key(), l.body(expires, false), false); err != nil {
		return err
	}
	l.mu.Lock()
	l.expires = expires
	l.mu.Unlock()
	return nil
}

// valid returns nil while the lease is held and unexpired.
func (l *lease) valid() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	if !l.fs.now().Before(l.expires) {
		return errcode.New(errcode.CheckpointLocked, l.fs.path(l.root), "check the connection to the object store and restart the query",
			"the checkpoint lease expired at %s without a renewal", l.expires.UTC().Format(time.RFC3339))
	}
	return nil
}

// Close stops renewing and marks the generation released, so the next
// query need not wait for the expiry.
func (l *lease) Close() error {
	select {
	case <-l.stop:
		return nil
	default:
	}
	close(l.stop)
	<-l.done
	l.fs.mu.Lock()
	if l.fs.leases[l.root] == l {
		delete(l.fs.leases, l.root)
	}
	l.fs.mu.Unlock()
	if l.valid() != nil {
		return nil // lost: the generation is someone else's business now
	}
	return l.fs.put(l.key(), l.body(l.fs.now(), true), false)
}

// checkLease refuses a write under a checkpoint whose lease this process
// took and no longer holds (a fence against a paused or partitioned writer;
// commits are put-if-absent anyway).
func (b *bucketFS) checkLease(key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for root, l := range b.leases {
		if key == root || strings.HasPrefix(key, root+"/") {
			if strings.HasPrefix(key, l.dir+"/") {
				return nil // the lease's own objects
			}
			return l.valid()
		}
	}
	return nil
}
