package s3serve

import (
	"sync"
	"sync/atomic"
)

// listGuard makes a listing one moment of the bucket against the server's
// own writes (PUT, copy, DELETE), as S3's strongly consistent listing is.
//
// A directory read is not a moment: POSIX leaves unspecified whether a name
// created or removed while a directory is open for reading is returned, and
// filesystems differ (btrfs and tmpfs stop at the last name that existed
// when the directory was opened; ext4 reads a small directory in one locked
// call). A checkpoint lease's takeover (PUT generation n+1, then DELETE n)
// between a listing's open and read of .lock/ could then list neither
// generation, and a second taker would start over at generation 0: two
// takers of one expired lease (CI saw 1 listing of 3000 empty).
//
// So every write brackets its visible step (the rename or link that
// publishes a name, an unlink, a mkdir) with begin/end on the stripe of the
// directory it changes. A listing notes the stripe of each directory before
// it reads it and accepts the walk only if, at its end, no write on a noted
// stripe is in flight or has ended since: every directory then held what
// was read from its read to the end of the walk, and the listing is the
// bucket at that end. A listing that loses optimisticAttempts races walks
// again holding mu exclusively, which writes' visible steps share, so a
// busy writer delays a listing by one visible step and never starves it.
//
// Files changed behind the server's back (by another process in the served
// directory) are not guarded: a listing then sees each directory as its
// read returns it. The zero value is ready; safe for concurrent use.
type listGuard struct {
	// mu is held shared by writes' visible steps and exclusively by a
	// listing's last attempts.
	mu      sync.RWMutex
	stripes [guardStripes]guardStripe
}

// guardStripes: directories hash onto this many stripes, so that a write
// makes a listing of an unrelated directory retry only when the two share
// a stripe (1 in 64).
const guardStripes = 64

// optimisticAttempts is how many walks a listing tries without blocking
// writes before it walks holding listGuard.mu.
const optimisticAttempts = 3

// guardStripe counts writes on its directories: inflight while in their
// visible step, ended once done. ended is raised before inflight falls, so
// a reader that sees inflight at 0 then reads ended counts every write
// that has left its visible step.
type guardStripe struct {
	inflight atomic.Int64
	ended    atomic.Uint64
}

func stripeOf(dir string) int {
	// FNV-1a: cheap, and any spread will do.
	h := uint32(2166136261)
	for i := 0; i < len(dir); i++ {
		h ^= uint32(dir[i])
		h *= 16777619
	}
	return int(h % guardStripes)
}

// write starts a write's visible step in the given directories (the
// directory a name is published in or removed from, and the parents of the
// directories a write creates); the returned func ends it.
func (g *listGuard) write(dirs ...string) (end func()) {
	g.mu.RLock()
	var ss []*guardStripe
	for _, d := range dirs {
		s := &g.stripes[stripeOf(d)]
		s.inflight.Add(1)
		ss = append(ss, s)
	}
	return func() {
		for _, s := range ss {
			s.ended.Add(1)
			s.inflight.Add(-1)
		}
		g.mu.RUnlock()
	}
}

// listView records what one listing attempt read: for each stripe of a
// directory read, the count of ended writes before the read.
type listView struct {
	g       *listGuard
	seen    [guardStripes]bool
	ended   [guardStripes]uint64
	tainted bool // a write on a noted stripe was in flight at a read
}

// note is called before dir is read.
func (v *listView) note(dir string) {
	i := stripeOf(dir)
	s := &v.g.stripes[i]
	// ended before inflight: a write in flight now shows in inflight; one
	// that left its visible step before shows in ended, so a later
	// change of ended means a write after this read's start.
	e := s.ended.Load()
	if s.inflight.Load() != 0 {
		v.tainted = true
	}
	if v.seen[i] && v.ended[i] != e {
		v.tainted = true
	}
	v.seen[i], v.ended[i] = true, e
}

// unchanged reports whether no write on a noted stripe was in flight at
// a read or began a visible step since: the directories read still hold
// what was read.
func (v *listView) unchanged() bool {
	if v.tainted {
		return false
	}
	for i, seen := range v.seen {
		if !seen {
			continue
		}
		s := &v.g.stripes[i]
		// inflight before ended: a write that leaves its visible step
		// between the two loads has already raised ended.
		if s.inflight.Load() != 0 || s.ended.Load() != v.ended[i] {
			return false
		}
	}
	return true
}
