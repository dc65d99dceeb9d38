package streamtest

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// ErrCrash is the error a crash point returns: the process "dies" there.
var ErrCrash = errors.New("streamtest: injected crash")

// Points is a schedule of named crash points, written as script text:
// "after-sink" fires at the first hit of after-sink, "after-sink@3" at the
// third, and a comma-separated list arms several. The doubles of this
// package hit these points:
//
//	read-start     Source.ReadBatch, before the first row
//	read-mid       Source.ReadBatch, after the first chunk
//	source-commit  Source.Commit, before recording
//	before-sink    Sink.AddBatch, before applying
//	after-sink     Sink.AddBatch, after applying
//
// and a test's own wrappers may hit any other name. A fired point is
// disarmed (a restarted run goes through it). A nil *Points never fires. It
// is safe for concurrent use.
type Points struct {
	mu    sync.Mutex
	armed map[string]int // point -> the hit that fires
	hits  map[string]int
	fired []string
}

// ParsePoints parses a schedule ("" arms nothing).
func ParsePoints(s string) (*Points, error) {
	p := &Points{}
	if err := p.Arm(s); err != nil {
		return nil, err
	}
	return p, nil
}

// Arm replaces the schedule by s and restarts the hit counts, so that one
// Points shared by several doubles can be re-armed between runs.
func (p *Points) Arm(s string) error {
	armed := map[string]int{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, at, ok := strings.Cut(f, "@")
		n := 1
		if ok {
			v, err := strconv.Atoi(at)
			if err != nil || v < 1 {
				return fmt.Errorf("crash point %q: want name or name@N with N >= 1", f)
			}
			n = v
		}
		armed[name] = n
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.hits, p.fired = armed, map[string]int{}, nil
	return nil
}

// MustPoints is ParsePoints for schedules written in the test itself.
func MustPoints(s string) *Points {
	p, err := ParsePoints(s)
	if err != nil {
		panic(err)
	}
	return p
}

// Hit counts a pass through point name and returns ErrCrash (wrapped with
// the point's name) when the schedule fires there.
func (p *Points) Hit(name string) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hits[name]++
	if n, ok := p.armed[name]; ok && p.hits[name] == n {
		delete(p.armed, name)
		p.fired = append(p.fired, name)
		return fmt.Errorf("crash at %s: %w", name, ErrCrash)
	}
	return nil
}

// Fired returns the points that fired, in order.
func (p *Points) Fired() []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.fired...)
}

// Pending returns the armed points that have not fired, sorted.
func (p *Points) Pending() []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for n := range p.armed {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Next reports whether the next Hit of name fires, for a wrapper that must
// prepare the crash (emit part of a chunk first) before hitting the point.
func (p *Points) Next(name string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.armed[name]
	return ok && p.hits[name]+1 == n
}
