package filelog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
)

// oracleAdmit is Admit by its definition, written apart from it: the
// eligible files (new, in the snapshot, young enough), ordered, then the
// longest prefix within the limits (at least one file).
func oracleAdmit(objs []Object, seen, snap map[string]struct{}, lim Limits, latestSeen int64) (uris []string, pending int) {
	type f struct {
		o   Object
		pos int
	}
	var el []f
	for i, o := range objs {
		_, s := seen[o.URI]
		_, in := snap[o.URI]
		if s || (snap != nil && !in) {
			continue
		}
		ageOn := lim.MaxFileAge > 0 && latestSeen > 0 && !(lim.LatestFirst && lim.MaxFiles > 0)
		if ageOn && o.ModTime.UnixMilli() < latestSeen-lim.MaxFileAge.Milliseconds() {
			continue
		}
		el = append(el, f{o, i})
	}
	if lim.LatestFirst {
		sort.Slice(el, func(i, j int) bool {
			if !el[i].o.ModTime.Equal(el[j].o.ModTime) {
				return el[i].o.ModTime.After(el[j].o.ModTime)
			}
			return el[i].pos < el[j].pos
		})
	}
	var total int64
	for _, e := range el {
		if lim.MaxFiles > 0 && len(uris) == lim.MaxFiles {
			break
		}
		if lim.MaxBytes > 0 && len(uris) > 0 && total+e.o.Size > lim.MaxBytes {
			break
		}
		total += e.o.Size
		uris = append(uris, e.o.URI)
	}
	return uris, len(el) - len(uris)
}

// TestAdmitAgainstOracle checks Admit against oracleAdmit on random
// listings, seen sets, snapshots and limits.
func TestAdmitAgainstOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for iter := 0; iter < 5000; iter++ {
		n := r.IntN(12)
		objs := make([]Object, n)
		seen := map[string]struct{}{}
		var snap map[string]struct{}
		if r.IntN(3) == 0 {
			snap = map[string]struct{}{}
		}
		for i := range objs {
			objs[i] = Object{URI: fmt.Sprintf("file:///d/%02d", i), Size: int64(1 + r.IntN(100)), ModTime: base.Add(time.Duration(r.IntN(10)) * time.Hour)}
			if r.IntN(4) == 0 {
				seen[objs[i].URI] = struct{}{}
			}
			if snap != nil && r.IntN(3) > 0 {
				snap[objs[i].URI] = struct{}{}
			}
		}
		lim := Limits{MaxFiles: r.IntN(4), MaxBytes: int64(r.IntN(3) * 80), LatestFirst: r.IntN(2) == 0}
		var latestSeen int64
		if r.IntN(2) == 0 {
			lim.MaxFileAge = time.Duration(r.IntN(6)) * time.Hour
			latestSeen = base.Add(time.Duration(r.IntN(12)) * time.Hour).UnixMilli()
		}
		in := slices.Clone(objs)
		got, pending := Admit(in, seen, snap, lim, 7, latestSeen)
		want, wantPending := oracleAdmit(objs, seen, snap, lim, latestSeen)
		var gotURIs []string
		for _, e := range got {
			if e.BatchID != 7 {
				t.Fatalf("entry %+v: batch id", e)
			}
			gotURIs = append(gotURIs, e.Path)
		}
		if !slices.Equal(gotURIs, want) || pending != int64(wantPending) {
			t.Fatalf("iter %d, limits %+v: admitted %v pending %d, want %v pending %d", iter, lim, gotURIs, pending, want, wantPending)
		}
		if !slices.Equal(in, objs) {
			t.Fatalf("iter %d: Admit reordered its input", iter)
		}
	}
}
