package storage

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/ethstream/ethstream/errcode"
)

// ProbeBudget bounds the start's probe of its S3 endpoints (Mux.Probe):
// every endpoint is asked once, all at once, each request retried per Retry
// (5.7-11.4 s of waits with DefaultRetry) and all of it within this time, so
// that a dead or stalled endpoint is reported within it rather than after
// each of the start's checks has spent a budget of its own on it (26 s, 30
// requests, for a checkpoint and a table on one dead endpoint).
const ProbeBudget = 30 * time.Second

// Probe asks each S3 endpoint of the FS once whether it answers (Probe).
func (m *Mux) Probe(ctx context.Context) error { return Probe(ctx, nil, m.Stores()...) }

// Stores returns the store of each bucket the FS routes to, in bucket
// order: what a start probes with its sources' stores (Probe).
func (m *Mux) Stores() []*Objects {
	objs := make([]*Objects, 0, len(m.buckets))
	for _, name := range m.bucketNames() {
		objs = append(objs, m.buckets[name].obj)
	}
	return objs
}

// Probe asks each S3 endpoint among objs once whether it answers: one LIST
// of at most one key per endpoint (where the first store that uses it
// lists: ProbedUnder), the endpoints in parallel, within ProbeBudget, each
// store's retries waiting on clock (its own clock when nil). It returns
// the first endpoint's STORAGE_UNAVAILABLE (its retry budget spent, or no
// answer within the budget) or STORAGE_CREDENTIALS error, in endpoint
// order; any other answer (a missing bucket, say) is left to the checks
// that follow, which name it in their own terms. It writes nothing.
func Probe(ctx context.Context, clock Clock, objs ...*Objects) error {
	byEndpoint := map[string]*Objects{}
	for _, o := range objs {
		if _, ok := byEndpoint[o.endpoint]; !ok {
			byEndpoint[o.endpoint] = o
		}
	}
	endpoints := make([]string, 0, len(byEndpoint))
	for ep := range byEndpoint {
		endpoints = append(endpoints, ep)
	}
	sort.Strings(endpoints)
	pctx, cancel := context.WithTimeout(ctx, ProbeBudget)
	defer cancel()
	errs := make([]error, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		o := byEndpoint[ep]
		if clock != nil {
			c := *o // the same client and bucket, waiting on clock
			c.clock = func() Clock { return clock }
			o = &c
		}
		wg.Go(func() { errs[i] = o.probe(ctx, pctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (m *Mux) bucketNames() []string {
	names := make([]string, 0, len(m.buckets))
	for n := range m.buckets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ProbedUnder returns s probed (Probe) by a listing under prefix rather than
// the bucket's root: where its reader lists, so the probe needs no more
// permission than the reader and its error names the reader's location.
func (s *Objects) ProbedUnder(prefix string) *Objects {
	c := *s
	c.probePrefix = prefix
	return &c
}

// probe lists at most one key of the bucket (under probePrefix) within pctx; ctx is the
// caller's (its end is not the probe's verdict).
func (s *Objects) probe(ctx, pctx context.Context) error {
	err := s.List(pctx, s.probePrefix, "", 1, 1, func([]ObjectInfo) error { return nil })
	if err == nil {
		return nil
	}
	if IsStoreFailure(err) {
		return err
	}
	if pctx.Err() != nil && ctx.Err() == nil {
		var oe *OpError
		last := "none"
		if errors.As(err, &oe) && oe.last != nil {
			last = Reason(oe.last)
		}
		return errcode.New(CodeStorageUnavailable, s.URI(s.probePrefix),
			"check that the endpoint is up and reachable (and not throttling), then start again: the next start resumes from the checkpoint",
			"%s did not answer a listing of %s within the start's probe budget of %s; last error: %s", s.endpoint, s.URI(s.probePrefix), ProbeBudget, last)
	}
	return nil
}
