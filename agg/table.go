package agg

// partWindows is the windows of a groupIndex part (log2: partWindowsLog).
// The seed's ~8 keys a 5-minute window make a part of ~500 entries in each
// of the two shards' partials, 2k slots, 16 KB: within the L1 cache. Parts
// of 1024 windows (128 KB, in L2) cost groupTable.find 0.23-0.28 CPU-s a
// seed backfill against 0.09-0.18 (profiles, 4 pairs), for 9k allocations
// more; before groupTable.reset left the clear to the next find, smaller
// parts (64 windows) saved nothing measurable, since every table then
// started cold anyway.
const (
	partWindowsLog = 7
	partWindows    = 1 << partWindowsLog
)

// groupIndex maps group keys to dense entry indexes 0, 1, 2, ... in
// insertion order. The keys themselves are the partial's entry columns,
// which the caller compares (find's eq): an index that kept a copy of every
// key (an arena of encoded keys) held ~60 bytes more per entry, ~60 MB in a
// seed backfill batch of a million groups, and a batch that grew it copied
// the arena at every doubling into fresh pages (memmove, mostly those
// copies, took 1.1 of the first backfill batch's 3.8 CPU-s in a profile).
//
// Keys are spread over small open-addressing tables by a part number the
// caller derives from the key (the window's index / partWindows for a
// windowed plan; one part otherwise). Time-ordered input (a backfill, a live
// feed) then inserts into one table of a thousand entries at a time, which
// stays in the CPU cache, where one table of a batch's million entries
// missed the cache on every insert (the slot load was ~12% of a seed
// backfill's CPU). Any part function is correct: equal keys have equal
// parts. Inserting costs no allocation of its own (only amortised growth)
// and a lookup allocates nothing. Not safe for concurrent use.
type groupIndex struct {
	n     int32 // entries
	parts map[int64]*groupTable
	// The part of the previous find, which the next one usually shares.
	lastPart int64
	last     *groupTable
	// free: emptied tables of the previous batch, for reuse; peak: the
	// parts the previous non-empty batch used (bounds free).
	free []*groupTable
	peak int
}

func newGroupIndex() groupIndex { return groupIndex{parts: map[int64]*groupTable{}} }

// len returns the number of entries.
func (g *groupIndex) len() int { return int(g.n) }

// find returns the entry whose key is in part part, has hash h and for
// which eq(entry) reports true, inserting entry len() if there is none: the
// caller then appends the new entry's key to its columns before the next
// find.
func (g *groupIndex) find(part int64, h uint64, eq func(e int32) bool) (idx int32, inserted bool) {
	t := g.last
	if t == nil || part != g.lastPart {
		if t = g.parts[part]; t == nil {
			if n := len(g.free); n > 0 {
				t, g.free = g.free[n-1], g.free[:n-1]
			} else {
				t = newGroupTable()
			}
			g.parts[part] = t
		}
		g.last, g.lastPart = t, part
	}
	e, inserted := t.find(h, g.n, eq)
	if inserted {
		g.n++
	}
	return e, inserted
}

// reset empties the index, keeping its tables for the next batch: as many
// as the last non-empty batch used (an empty reset says nothing about batch
// sizes: the operator resets after Finish and again after Commit), so that
// backfill batches reuse theirs and the first live batch after them lets
// most go. Each table keeps its own memory by the same rule (groupTable.reset).
func (g *groupIndex) reset() {
	if g.n > 0 {
		g.peak = len(g.parts)
	}
	for _, t := range g.parts {
		t.reset()
		if len(g.free) < g.peak {
			g.free = append(g.free, t)
		}
	}
	clear(g.parts)
	if len(g.free) > g.peak {
		clear(g.free[g.peak:])
		g.free = g.free[:g.peak]
	}
	g.n, g.last = 0, nil
}

// groupTable is one part of a groupIndex: an open-addressing (linear
// probing) table of entry indexes.
type groupTable struct {
	// slots: 0 = empty, otherwise the high 32 bits of the key's hash (a
	// tag that rejects almost every other key without touching the entry's
	// memory, one cache miss saved per probe) and entry index + 1. A key's
	// home slot is its hash's top bits (shift), which its tag holds for a
	// table of up to 2^32 slots: growing rehashes the slots alone, where a
	// list of the table's entries and their hashes cost 12 bytes an entry
	// (12 MB live and 66 of the 1,811 MB allocated in a seed backfill).
	slots []uint64
	n     int  // entries
	shift uint // 64 - log2(len(slots))
	// stale: the slots still hold the previous batch's keys (reset), which
	// the first find of the next batch clears.
	stale bool
}

func newGroupTable() *groupTable {
	return &groupTable{slots: make([]uint64, 64), shift: 64 - 6}
}

func slot(h uint64, e int32) uint64 { return h&^(1<<32-1) | uint64(uint32(e+1)) }

// find returns the entry of hash h for which eq holds, inserting entry next
// if there is none.
func (t *groupTable) find(h uint64, next int32, eq func(e int32) bool) (idx int32, inserted bool) {
	if t.stale {
		clear(t.slots)
		t.stale = false
	}
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	tag := h &^ (1<<32 - 1)
	for i := h >> t.shift; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			t.slots[i] = slot(h, next)
			t.n++
			return next, true
		}
		if s&^(1<<32-1) == tag {
			if e := int32(uint32(s)) - 1; eq(e) {
				return e, false
			}
		}
	}
}

// grow doubles the slots, placing each key by its tag.
func (t *groupTable) grow() {
	old := t.slots
	if len(old) >= 1<<32 {
		panic("aggregation: a group table of more than 2^32 slots")
	}
	t.slots = make([]uint64, 2*len(old))
	t.shift--
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := s >> t.shift
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// reset empties the table, keeping its memory for the next batch unless it
// grew far beyond what small (live) batches need and the batch just done was
// small: backfill batches of similar size then reuse the slots (regrowing
// them costs a rehash per doubling and fresh pages every batch), and the
// first small batch after them lets the memory go.
//
// The slots are cleared by the table's next find, not here: a batch of a
// backfill fills its tables one after the other (groupIndex), and a table
// cleared at the end of the previous batch has left the CPU caches by the
// time its turn comes, so that every insert missed them (the slot load was
// ~0.5 of a seed backfill's 6 CPU-s). Cleared just before its inserts, the
// table is in the cache they write.
func (t *groupTable) reset() {
	const keep = 1 << 20
	if len(t.slots) > keep && t.n > 0 && 8*t.n < len(t.slots) {
		*t = *newGroupTable()
		return
	}
	t.n, t.stale = 0, true
}
