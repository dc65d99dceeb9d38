package agg

import (
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"unsafe"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// accum holds one aggregate's partial values, one slot per group entry.
type accum struct {
	ints   []int64         // count; sum/min/max of Int64 and Timestamp
	floats []float64       // sum/min/max of Float64
	decs   []stream.Dec128 // sum/min/max/avg of Decimal
	nn     []int64         // non-null inputs seen (sum/min/max)
	sketch sketchAccum     // approx_count_distinct (approx.go)
	// overflow: a long sum of this batch left BIGINT (it wrapped).
	overflow bool
}

// partial is the batch-local hash aggregation: Process folds rows into it,
// Finish merges it into the state store once per distinct key (not per row).
// Entries are kept as columns (struct of arrays) in insertion order. Not safe
// for concurrent use.
type partial struct {
	p    *plan
	seed maphash.Seed
	salt uint64 // the row hash's start (rowHash), drawn per partial
	// strCol[k]: group column k takes the strings path (plan.strKey).
	strCol []bool
	groups groupIndex
	start  []int64   // window start per entry (windowed plans)
	gInt   [][]int64 // per group column: values (Int64/Timestamp columns)
	// gSid: per string group column, the entry's string by its id in the
	// intern table (names; 0 for a null, and for ""): ids, not strings, so
	// that the entry columns hold no pointer and the GC never scans them
	// (a seed backfill batch's million entries held 16 MB of strings, all
	// scanned by each of its collections).
	gSid   [][]uint32
	gNull  [][]bool // per String group column: the entry's key is null
	acc    []accum
	intern map[string]interned
	// names[id] is interned string id (the partial's private copy), names[0]
	// the empty string.
	names []string
	// rank[id] is name id's place in the names' order when ranked (keyRuns
	// sets it; a name interned since unsets it): cmpEntries then orders two
	// of the partial's entries by integers, not by their strings' bytes.
	rank   []uint32
	ranked bool
	// rankBits is, when ranked and every group column is a string, the
	// bits of one column's place in a run key (runKey), 0 otherwise;
	// runKeys is sortRun's scratch.
	rankBits uint
	runKeys  []runKey
	// keyEnc[keyEncOff[id]:keyEncOff[id+1]] is name id in state's string
	// key encoding when ranked: stateKey copies it where it would scan and
	// escape the string again for every entry.
	keyEnc    []byte
	keyEncOff []int
	// internCache: recently interned strings (see internContent), a
	// cache line each, allocated apart so that the lines are aligned.
	internCache *[1 << internCacheBits]internSlot
	// The chunk's keys by the identity (address and length) of the chunk's
	// strings (assign); gen is the chunk's generation, and a slot of
	// another generation is empty.
	keyCache [1 << identityCacheBits]keySlot
	gen      uint32
	// strCache: the chunk's interned strings by the identity of its
	// strings (internOf); strGen is its generation (newChunk).
	strCache [1 << strCacheBits]strSlot
	strGen   uint32
	// The chunk's dictionary views (stream.Dict, dict.go): dvals[k][d] is
	// the interned value d of group column k's view (set when its gen is
	// dgen, the chunk's); dkeys are the chunk's keys by their views'
	// codes when every group column has one (dictAll), dstride[k] column
	// k's factor in a code.
	dvals   [][]dictVal
	dkeys   []dictKey
	dstride []int
	dgen    uint32
	dictAll bool
	// skipRecent: the previous chunk's keys were found by identity, so
	// assign skips the scan of recent keys; probed and slow count the
	// current chunk's rows looked up and those of them that identity missed
	// but an existing entry matched.
	skipRecent   bool
	probed, slow int

	// per-chunk scratch
	rowIdx []int32 // entry of each row for the current window instance, -1 = skip
	// rowSid[k]: the interned id of string group column k of the row
	// rowHash hashed last (unset for a null or an integer column).
	rowSid []uint32
	// The chunk's most recently inserted or found keys (see assign).
	recent  [8]recentKey
	nRecent int
	cols    chunkCols

	// shard and nShards split a windowed plan's keys between partials that
	// fold the same chunk on goroutines of their own (shard.go): this one
	// keeps the window instances whose window index is shard modulo
	// nShards (nShards 0 or 1: all of them). A key's window is part of it,
	// so the shards' keys are disjoint.
	shard, nShards int64
}

// chunkCols are the input columns of one chunk, resolved once per chunk.
type chunkCols struct {
	ts    *stream.Column
	group []*stream.Column
	agg   []*stream.Column // nil for count(*)
	// The group columns' value slices by kind, for sameGroup's inner loop;
	// strValid[k] is strs[k]'s validity (nil: no null in the chunk).
	strs     [][]string
	strValid [][]bool
	ints     [][]int64
	intValid [][]bool
	// signs is the chunk's Batch.Signs: nil when every row is an insertion.
	signs []int8
	// dict[k]: group column k's dictionary view, nil without one.
	dict []*stream.Dict
}

func newPartial(p *plan) *partial {
	pt := &partial{
		p:      p,
		seed:   maphash.MakeSeed(),
		salt:   rand.Uint64(),
		strCol: make([]bool, len(p.groupType)),
		groups: newGroupIndex(),
		gInt:   make([][]int64, len(p.groupType)),
		gSid:   make([][]uint32, len(p.groupType)),
		gNull:  make([][]bool, len(p.groupType)),
		acc:    make([]accum, len(p.aggs)),
		intern: map[string]interned{},
		names:  []string{""},
		// internCache is allocated apart: a large object starts on a page,
		// so that each slot is one cache line.
		internCache: new([1 << internCacheBits]internSlot),
		rowSid:      make([]uint32, len(p.groupType)),
		cols: chunkCols{group: make([]*stream.Column, len(p.groupType)), agg: make([]*stream.Column, len(p.aggs)),
			dict: make([]*stream.Dict, len(p.groupType))},
		dvals:   make([][]dictVal, len(p.groupType)),
		dstride: make([]int, len(p.groupType)),
	}
	for k := range pt.strCol {
		pt.strCol[k] = p.strKey(k)
	}
	pt.forgetStrings() // strGen 1: the empty slots' 0 matches no slot
	return pt
}

// len returns the number of entries (every entry has a start).
func (pt *partial) len() int { return len(pt.start) }

// keyStr is entry e's value of string group column k ("" for a null).
func (pt *partial) keyStr(k, e int) string { return pt.names[pt.gSid[k][e]] }

func (pt *partial) reset() {
	pt.groups.reset()
	pt.start = pt.start[:0]
	for j := range pt.gInt {
		pt.gInt[j] = pt.gInt[j][:0]
		pt.gSid[j] = pt.gSid[j][:0]
		pt.gNull[j] = pt.gNull[j][:0]
	}
	for a := range pt.acc {
		pt.acc[a].ints = pt.acc[a].ints[:0]
		pt.acc[a].floats = pt.acc[a].floats[:0]
		pt.acc[a].decs = pt.acc[a].decs[:0]
		pt.acc[a].nn = pt.acc[a].nn[:0]
		pt.acc[a].sketch.reset()
		pt.acc[a].overflow = false
	}
	// The intern table bounds its own growth: high-cardinality string keys
	// would otherwise keep every value ever seen alive.
	if len(pt.intern) > 1<<16 {
		pt.intern = map[string]interned{}
		clear(pt.internCache[:])
		clear(pt.names[1:])
		pt.names = pt.names[:1]
		pt.ranked = false
	}
	pt.forgetStrings()
}

func unresolved(name string) error {
	return errcode.New(CodeUnresolvedColumn, "", "check the query's projection and the source's columns",
		"column %q is not in the input", name)
}

func mismatch(name string, got, want stream.Type) error {
	return errcode.New(CodeDatatypeMismatch, "", "declare the column's real type in Spec.ColumnTypes",
		"column %q is %s, the aggregation expects %s", name, got, want)
}

// resolve finds and checks the chunk's columns.
func (pt *partial) resolve(in *stream.Batch) error {
	p := pt.p
	col := func(name string, want stream.Type) (*stream.Column, error) {
		c := in.Column(name)
		if c == nil {
			return nil, unresolved(name)
		}
		if c.Type != want {
			return nil, mismatch(name, c.Type, want)
		}
		if c.Len() != in.Len || (c.Valid != nil && len(c.Valid) != in.Len) {
			return nil, errcode.New(errcode.InvalidArgument, "", "this is a bug in the source",
				"column %q has %d values, batch has %d rows", name, c.Len(), in.Len)
		}
		return c, nil
	}
	var err error
	if p.window {
		if pt.cols.ts, err = col(p.spec.Window.Column, stream.Timestamp); err != nil {
			return err
		}
	}
	for j, g := range p.spec.GroupBy {
		c, err := col(g, p.groupType[j])
		if err != nil {
			return err
		}
		// A null key is a group of its own (Spark groups nulls together);
		// state format 1 has no null for an Int64 or Timestamp key.
		if c.Valid != nil && !p.nullKey(j) {
			for i := 0; i < in.Len; i++ {
				if !c.Valid[i] {
					return errcode.New(CodeNullGroupKey, "", "filter or fill nulls before grouping, or start the query on a new checkpoint (its state format has null keys)",
						"group column %q (%s) is null at row %d: this checkpoint's state (format 1) has no null %s key", g, p.groupType[j], i, p.groupType[j])
				}
			}
		}
		pt.cols.group[j] = adaptKey(c)
	}
	pt.cols.strs, pt.cols.strValid = pt.cols.strs[:0], pt.cols.strValid[:0]
	pt.cols.ints, pt.cols.intValid = pt.cols.ints[:0], pt.cols.intValid[:0]
	for j, c := range pt.cols.group {
		if p.strKey(j) {
			pt.cols.strs = append(pt.cols.strs, c.Strings)
			pt.cols.strValid = append(pt.cols.strValid, c.Valid)
		} else {
			pt.cols.ints = append(pt.cols.ints, c.Int64s)
			pt.cols.intValid = append(pt.cols.intValid, c.Valid)
		}
	}
	for a := range p.aggs {
		ra := &p.aggs[a]
		pt.cols.agg[a] = nil
		if ra.Column != "" {
			if pt.cols.agg[a], err = col(ra.Column, ra.in); err != nil {
				return err
			}
		}
	}
	pt.cols.signs = in.Signs
	pt.newChunk()
	pt.resolveDicts()
	if cap(pt.rowIdx) < in.Len {
		pt.rowIdx = make([]int32, in.Len)
	}
	pt.rowIdx = pt.rowIdx[:in.Len]
	return nil
}

// sameGroup reports whether rows i and j have equal group values. String
// comparison is cheap for interned strings (equal pointers).
func (pt *partial) sameGroup(i, j int) bool {
	// Last column first: group lists usually go from coarse to fine
	// (source, miner), so the last one rejects a different key soonest.
	for k := len(pt.cols.strs) - 1; k >= 0; k-- {
		if v := pt.cols.strValid[k]; v != nil {
			if v[i] != v[j] {
				return false
			}
			if !v[i] {
				continue // both null
			}
		}
		if c := pt.cols.strs[k]; c[i] != c[j] {
			return false
		}
	}
	for k, c := range pt.cols.ints {
		if v := pt.cols.intValid[k]; v != nil {
			if v[i] != v[j] {
				return false
			}
			if !v[i] {
				continue // both null
			}
		}
		if c[i] != c[j] {
			return false
		}
	}
	return true
}

// newChunk starts a chunk's generation of the identity caches, and decides
// from the previous chunk whether assign scans the recent keys: a source
// whose equal strings share their memory (a Parquet dictionary's, the
// archive decoder's interned miners) has its keys found by identity, and
// the scan (up to 8 comparisons, all failing for a new key: 1.9 of a seed
// backfill's 17 CPU-s) only costs; one whose rows each own their strings
// (a JSON line's, a decimal key's) misses by identity and keeps the scan.
func (pt *partial) newChunk() {
	pt.skipRecent = pt.probed > 0 && pt.slow*16 < pt.probed
	pt.probed, pt.slow = 0, 0
	pt.gen++
	if pt.gen == 0 { // wrapped: a slot's stamp could match again
		clear(pt.keyCache[:])
		pt.gen = 1
	}
	pt.forgetStrings()
}

// forgetStrings empties strCache: an identity says nothing across chunks
// (a source may rewrite its buffers once a chunk is consumed:
// TestIdentityBufferReused).
func (pt *partial) forgetStrings() {
	pt.strGen++
	if pt.strGen == 0 {
		clear(pt.strCache[:])
		pt.strGen = 1
	}
}

// identityCacheBits is log2 of keyCache's slots.
const identityCacheBits = 10

// strCacheBits is log2 of strCache's slots.
const strCacheBits = 10

// keySlot is a key of the current chunk: row's group with window start
// start is entry idx.
type keySlot struct {
	gen      uint32
	row, idx int32
	start    int64
}

// strSlot: the chunk's string s interns as interned (the slot holds s, so that
// no other string of the chunk can be at its address).
type strSlot struct {
	s   string
	gen uint32
	interned
}

// interned is a string's id in the partial's intern table (partial.names:
// its private copy) and the string's hash. It holds no pointer, so that
// the caches of them (internCache: 1 MB) cost no GC scan.
type interned struct {
	h  uint64
	id uint32
}

// identityHash hashes row i's group (with window start start) by identity:
// its strings' addresses and lengths, its integers' values.
func (pt *partial) identityHash(start int64, i int) uint64 {
	const m = 0x9E3779B97F4A7C15
	h := uint64(start) * m
	for _, c := range pt.cols.strs {
		s := c[i]
		h = (h ^ uint64(uintptr(unsafe.Pointer(unsafe.StringData(s))))) * m
		h = (h ^ uint64(len(s))) * m
	}
	for _, c := range pt.cols.ints {
		h = (h ^ uint64(c[i])) * m
	}
	return h
}

// sameIdentity reports whether rows i and j of the chunk have the same
// group by identity: equal validity, strings at the same address with the
// same length (so equal: a chunk's strings are immutable and alive while it
// is folded), equal integers. False says nothing (equal strings may live
// apart).
func (pt *partial) sameIdentity(i, j int) bool {
	for k, c := range pt.cols.strs {
		if v := pt.cols.strValid[k]; v != nil {
			if v[i] != v[j] {
				return false
			}
			if !v[i] {
				continue // both null
			}
		}
		if a, b := c[i], c[j]; len(a) != len(b) || unsafe.StringData(a) != unsafe.StringData(b) {
			return false
		}
	}
	for k, c := range pt.cols.ints {
		if v := pt.cols.intValid[k]; v != nil {
			if v[i] != v[j] {
				return false
			}
			if !v[i] {
				continue
			}
		}
		if c[i] != c[j] {
			return false
		}
	}
	return true
}

// rowHash hashes row i's group (with window start start) by content, and
// sets rowStr to its interned strings (rowIs compares them, addEntry keeps
// them): a string's hash is computed once, when it is interned, so a row
// costs a multiply per column where an encoding of its key hashed its
// every byte (0.46 of a seed backfill's 15 CPU-s).
func (pt *partial) rowHash(start int64, i int) uint64 {
	const m = 0x9E3779B97F4A7C15
	const null = 0x6A09E667F3BCC908 // a null column's term (any constant)
	h := (pt.salt ^ uint64(start)) * m
	for k, c := range pt.cols.group {
		var x uint64
		switch {
		case c.IsNull(i):
			x = null
		case pt.strCol[k]:
			var sh uint64
			if d, ok := pt.dictAt(k, i); ok {
				pt.rowSid[k], sh = pt.dictValue(k, d)
			} else {
				in := pt.internOf(c.Strings[i])
				pt.rowSid[k], sh = in.id, in.h
			}
			x = sh
		default:
			x = uint64(c.Int64s[i])
		}
		h = (h ^ x) * m
	}
	// The table indexes by the low bits and tags by the high ones: mix
	// every bit into both (murmur3's finaliser).
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// rowIs reports whether the row rowHash hashed last (window start start)
// is entry e's group. Its strings are interned, as the entries' are, so
// equal strings are one id (a compare of no bytes).
func (pt *partial) rowIs(e int32, start int64, i int) bool {
	if pt.start[e] != start {
		return false
	}
	for k, c := range pt.cols.group {
		null := c.IsNull(i)
		if pt.gNull[k][e] != null {
			return false
		}
		if null {
			continue
		}
		if pt.strCol[k] {
			if pt.gSid[k][e] != pt.rowSid[k] {
				return false
			}
		} else if pt.gInt[k][e] != c.Int64s[i] {
			return false
		}
	}
	return true
}

// addEntry appends the row rowHash hashed last (window start start) as a
// new entry.
func (pt *partial) addEntry(start int64, i int) {
	if len(pt.start) == cap(pt.start) {
		pt.reserve(max(2*len(pt.start), minEntryRoom))
	}
	pt.start = append(pt.start, start)
	for k, c := range pt.cols.group {
		if pt.strCol[k] {
			if c.IsNull(i) {
				pt.gSid[k] = append(pt.gSid[k], 0)
				pt.gNull[k] = append(pt.gNull[k], true)
				continue
			}
			pt.gNull[k] = append(pt.gNull[k], false)
			// The private copy's id (internOf): an entry must not keep
			// the chunk's memory alive (a dictionary's, a line's).
			pt.gSid[k] = append(pt.gSid[k], pt.rowSid[k])
		} else {
			null := c.IsNull(i)
			v := c.Int64s[i]
			if null {
				v = 0 // a null's slot holds no value
			}
			pt.gInt[k] = append(pt.gInt[k], v)
			pt.gNull[k] = append(pt.gNull[k], null)
		}
	}
	for a := range pt.acc {
		acc := &pt.acc[a]
		if ps := pt.p.aggs[a].sketch; ps != nil {
			acc.sketch.grow(ps)
		} else if t := pt.p.aggs[a].acc(); t.Kind() == stream.Decimal {
			acc.decs = append(acc.decs, stream.Dec128{})
		} else if t.Storage() == stream.Float64 {
			acc.floats = append(acc.floats, 0)
		} else {
			acc.ints = append(acc.ints, 0)
		}
		if pt.p.aggs[a].hasNonNull() {
			acc.nn = append(acc.nn, 0)
		}
	}
}

// minEntryRoom is the entries the first reserve makes room for.
const minEntryRoom = 1024

// reserve makes room for n entries in every column addEntry appends to,
// so that they grow together and by doubling: append's own growth of a
// large slice is by a quarter, and a seed backfill's first batch (half a
// million entries a partial) copied each column about four times its final
// size into memory never touched before (page faults in the copy: 0.4 of
// a backfill's ~10 CPU-s at load 12, on the read step's critical path).
// reset keeps the room for the next batch.
func (pt *partial) reserve(n int) {
	pt.start = withRoom(pt.start, n)
	for k := range pt.cols.group {
		if pt.strCol[k] {
			pt.gSid[k] = withRoom(pt.gSid[k], n)
		} else {
			pt.gInt[k] = withRoom(pt.gInt[k], n)
		}
		pt.gNull[k] = withRoom(pt.gNull[k], n)
	}
	for a := range pt.acc {
		acc := &pt.acc[a]
		if pt.p.aggs[a].sketch != nil {
			continue // its registers grow by their own rule (approx.go)
		} else if t := pt.p.aggs[a].acc(); t.Kind() == stream.Decimal {
			acc.decs = withRoom(acc.decs, n)
		} else if t.Storage() == stream.Float64 {
			acc.floats = withRoom(acc.floats, n)
		} else {
			acc.ints = withRoom(acc.ints, n)
		}
		if pt.p.aggs[a].hasNonNull() {
			acc.nn = withRoom(acc.nn, n)
		}
	}
}

// withRoom returns s with a capacity of exactly n (at least its own): the
// entry columns then fill up together, whatever their element size.
func withRoom[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s
	}
	t := make([]T, len(s), n)
	copy(t, s)
	return t
}

// internOf returns s's id in the partial's intern table (names: its
// private copy) and its hash. The chunk's strings by identity (strCache)
// answer most calls with no look at their bytes (a Parquet dictionary's
// rows share its strings). Then a direct-mapped cache in front of the
// intern map: it is indexed by a hash of the string's last 8 bytes (an address's hex tail) and checked by
// content, so it is right whatever it holds, and a hit costs a short
// compare where a map lookup hashes the whole string (~1 CPU-s of a seed
// backfill went to those lookups). It has room for the seed archive's
// fee recipients of a year (a few thousand miners before the merge, up to
// 20,000 validators after it): with 509 slots indexed by three characters
// it missed on most of them (issue 43's profile: 3.7 of 122 CPU-s in the
// map); with 4,096 slots 1.10M of a seed backfill's 2.59M calls here went
// on to the map, with 16,384 0.52M.
func (pt *partial) internOf(s string) interned {
	if s == "" {
		// Not in the caches: their empty slots hold "" with hash 0.
		return interned{h: emptyHash}
	}
	p := uint64(uintptr(unsafe.Pointer(unsafe.StringData(s))))
	ps := &pt.strCache[((p^uint64(len(s)))*0x9E3779B97F4A7C15)>>(64-strCacheBits)]
	if ps.gen == pt.strGen && unsafe.StringData(ps.s) == unsafe.StringData(s) && len(ps.s) == len(s) {
		return ps.interned
	}
	in := pt.internContent(s)
	*ps = strSlot{s: s, gen: pt.strGen, interned: in}
	return in
}

// emptyHash is the empty string's hash (any constant).
const emptyHash = 0xBB67AE8584CAA73B

// internContent is internOf by the string's content (not empty).
func (pt *partial) internContent(s string) interned {
	var x uint64
	n := len(s)
	if n >= 8 {
		x = binary.BigEndian.Uint64(unsafe.Slice(unsafe.StringData(s[n-8:]), 8)) // one load
	} else {
		for i := range n {
			x = x<<8 | uint64(s[i])
		}
	}
	h := ((x ^ uint64(n)) * 0x9E3779B97F4A7C15) >> (64 - internCacheBits)
	slot := &pt.internCache[h]
	if n <= len(slot.b) {
		if int(slot.n) == n && string(slot.b[:n]) == s { // an empty slot's n 0 is never s's
			return slot.interned
		}
	} else if pt.names[slot.id] == s {
		return slot.interned
	}
	in, ok := pt.intern[s]
	if !ok {
		v := string([]byte(s))
		if len(pt.names) > math.MaxUint32 {
			panic("aggregation: more than 2^32 distinct group strings in a batch")
		}
		in = interned{h: maphash.String(pt.seed, v), id: uint32(len(pt.names))}
		pt.names = append(pt.names, v)
		pt.intern[v] = in
		pt.ranked = false
	}
	slot.interned = in
	slot.n = uint32(min(n, len(slot.b)+1))
	copy(slot.b[:], s)
	return in
}

// internCacheBits is log2 of internContent's cache slots.
const internCacheBits = 14

// internSlot is a slot of internContent's cache: a string interned and,
// when it fits, its bytes (n: its length, len(b)+1 for a longer one, whose
// id's name is compared instead). A hit reads this cache line and the
// string looked up; comparing with the interned copy (partial.names) read
// the names' header and the copy's bytes, two more cache misses a look-up
// in a batch of 23k miners (a seed backfill makes 2.5M look-ups: one per
// distinct miner per chunk and shard). 64 bytes, no pointer.
type internSlot struct {
	interned
	n uint32
	b [44]byte // an Ethereum address in 0x-hex is 42
}

// chunkStats is what one chunk contributes to the batch's metrics.
type chunkStats struct {
	dropped int64 // window instances dropped as late
	nullTS  int64 // rows without event time (skipped, as Spark's window() filters them)
	// lateRetractions: window instances of retractions dropped as late (also
	// in dropped): their windows were closed, so they are never applied.
	lateRetractions int64
}

// add folds one chunk into the table: for each window instance k, a first
// pass maps rows to entries (rowIdx), then one tight pass per aggregate.
func (pt *partial) add(in *stream.Batch, wmUs int64) (chunkStats, error) {
	var st chunkStats
	if err := pt.resolve(in); err != nil {
		return st, err
	}
	n := in.Len
	inst := 1
	if pt.p.window {
		inst = pt.p.nInst
	}
	for k := 0; k < inst; k++ {
		d, nulls, lateRetr := pt.assign(n, int64(k), wmUs)
		st.dropped += d
		st.lateRetractions += lateRetr
		if k == 0 {
			st.nullTS = nulls
		}
		if pt.cols.signs != nil {
			pt.accumulateSigned()
		} else {
			pt.accumulate()
		}
	}
	if a := pt.overflowed(); a >= 0 {
		return st, &overflowError{agg: a}
	}
	return st, nil
}

// overflowError is a long sum that left BIGINT where that is an error;
// the operator names the batch (ARITHMETIC_OVERFLOW).
type overflowError struct{ agg int }

func (e *overflowError) Error() string { return "long overflow" }

// overflowed returns the first aggregate whose long sum overflowed where
// that is an error, or -1: a sum under ANSI mode (spark.sql.ansi.enabled,
// the default; without it the sum wraps as in Spark 3), and an avg always
// (Spark sums an avg in a double, which does not overflow; its long sum
// here cannot hold the value).
func (pt *partial) overflowed() int {
	for a := range pt.acc {
		ra := &pt.p.aggs[a]
		if pt.acc[a].overflow && (ra.Kind == Avg || !pt.p.spec.NonANSI || ra.acc().Kind() == stream.Decimal) {
			return a
		}
	}
	return -1
}

// assign sets rowIdx for window instance k and returns the rows dropped as
// late, the rows without event time and, of the late rows, the retractions.
func (pt *partial) assign(n int, k, wmUs int64) (dropped, nulls, lateRetractions int64) {
	p := pt.p
	idx := pt.rowIdx
	var ts []int64
	var tsValid []bool
	if p.window {
		ts, tsValid = pt.cols.ts.Int64s, pt.cols.ts.Valid
	}
	size, slide := p.sizeUs, p.slideUs
	pt.nRecent = 0
	next := 0
	lastLo := int64(math.MaxInt64) // start of the slide interval of the previous row
	var part int64                 // the groupIndex part of the row's window
	mine := true                   // the row's window is this shard's
	for i := 0; i < n; i++ {
		var start int64
		if p.window {
			if tsValid != nil && !tsValid[i] {
				idx[i] = -1
				nulls++
				continue
			}
			t := ts[i]
			// Sorted-ish input stays in one slide interval for many rows:
			// skip the (slow) division while it does.
			if t < lastLo || t >= lastLo+slide {
				w := floorDiv(t-p.startUs, slide)
				lastLo = w*slide + p.startUs
				if pt.nShards > 1 {
					mine = floorMod(w-k, pt.nShards) == pt.shard
				}
				// Windows partWindows at a time (groupIndex): a time-ordered
				// batch fills one small table after the other.
				part = (w - k) >> partWindowsLog
			}
			if !mine {
				idx[i] = -1 // the other shard's window
				continue
			}
			start = lastLo - k*slide
			end := start + size
			if end <= t { // instance k does not contain t (size not a multiple of slide)
				idx[i] = -1
				continue
			}
			if end <= wmUs {
				idx[i] = -1
				dropped++
				if pt.cols.signs != nil && pt.cols.signs[i] < 0 {
					lateRetractions++
				}
				continue
			}
		}
		// Every group column has a dictionary view: the key's code finds
		// it (dict.go), no look at a string.
		if pt.dictAll {
			if e, ok := pt.assignDict(part, start, i); ok {
				idx[i] = e
				continue
			}
		}
		// A key of this chunk seen before, by the identity of its strings
		// (the source's equal strings usually share their memory): one
		// probe, no look at the bytes.
		pt.probed++
		slot := &pt.keyCache[pt.identityHash(start, i)>>(64-identityCacheBits)]
		if slot.gen == pt.gen && slot.start == start && pt.sameIdentity(i, int(slot.row)) {
			idx[i] = slot.idx
			continue
		}
		// Time-ordered input touches a handful of keys at a time (about 6
		// builders per 5-minute window): a few comparisons against the
		// recently used keys of this chunk avoid hashing and the cache
		// misses of a lookup in a table of 100k+ keys, when identity does
		// not find them (newChunk).
		hit := false
		if !pt.skipRecent {
			for j := range pt.nRecent {
				r := &pt.recent[j]
				if r.start == start && pt.sameGroup(i, r.row) {
					idx[i] = r.idx
					hit = true
					break
				}
			}
		}
		if hit {
			pt.slow++
			*slot = keySlot{gen: pt.gen, row: int32(i), idx: idx[i], start: start}
			continue
		}
		h := pt.rowHash(start, i)
		e, inserted := pt.groups.find(part, h, func(e int32) bool { return pt.rowIs(e, start, i) })
		if inserted {
			pt.addEntry(start, i)
		} else {
			pt.slow++
		}
		idx[i] = e
		*slot = keySlot{gen: pt.gen, row: int32(i), idx: e, start: start}
		pt.recent[next] = recentKey{row: i, start: start, idx: e}
		next = (next + 1) % len(pt.recent)
		pt.nRecent = min(pt.nRecent+1, len(pt.recent))
	}
	return dropped, nulls, lateRetractions
}

// recentKey is a key seen at row of the current chunk, mapped to entry idx.
type recentKey struct {
	row   int
	start int64
	idx   int32
}

// accumulate folds the rows mapped by rowIdx into the accumulators.
func (pt *partial) accumulate() {
	idx := pt.rowIdx
	for a := range pt.p.aggs {
		ra := &pt.p.aggs[a]
		acc := &pt.acc[a]
		c := pt.cols.agg[a]
		if c == nil { // count(*)
			cnt := acc.ints
			for _, g := range idx {
				if g >= 0 {
					cnt[g]++
				}
			}
			continue
		}
		valid := c.Valid
		switch {
		case ra.sketch != nil:
			acc.sketch.add(ra, c, idx)
		case ra.Kind == Count:
			cnt := acc.ints
			for i, g := range idx {
				if g >= 0 && (valid == nil || valid[i]) {
					cnt[g]++
				}
			}
		case ra.acc().Kind() == stream.Decimal:
			accDec(ra.Kind, acc, c.Decimals, valid, idx, nil)
		case ra.in.Storage() == stream.Float64:
			accFloat(ra.Kind, acc, c.Float64s, valid, idx)
		case ra.acc().Storage() == stream.Float64: // avg of an Int64 column: a double sum
			accIntAsFloat(acc, c.Int64s, valid, idx)
		default:
			accInt(ra.Kind, acc, c.Int64s, valid, idx)
		}
	}
}

// accIntAsFloat is Spark's Average over a BIGINT column: each value is cast
// to a double and added to a double sum (which does not overflow).
func accIntAsFloat(acc *accum, vs []int64, valid []bool, idx []int32) {
	out, nn := acc.floats, acc.nn
	for i, g := range idx {
		if g < 0 || (valid != nil && !valid[i]) {
			continue
		}
		out[g] += float64(vs[i])
		nn[g]++
	}
}

// accumulateSigned is accumulate for a chunk with retractions: each row
// counts with its sign (count and sum subtract, the non-null counts too).
// Min and max never get here: Process refuses retractions for them.
func (pt *partial) accumulateSigned() {
	idx, sg := pt.rowIdx, pt.cols.signs
	for a := range pt.p.aggs {
		ra := &pt.p.aggs[a]
		acc := &pt.acc[a]
		c := pt.cols.agg[a]
		var valid []bool
		if c != nil {
			valid = c.Valid
		}
		if c != nil && ra.Kind != Count && ra.acc().Kind() == stream.Decimal {
			accDec(ra.Kind, acc, c.Decimals, valid, idx, sg)
			continue
		}
		for i, g := range idx {
			if g < 0 || (valid != nil && !valid[i]) {
				continue
			}
			s := int64(sg[i])
			switch {
			case ra.Kind == Count:
				acc.ints[g] += s
				continue
			case ra.in.Storage() == stream.Float64:
				acc.floats[g] += float64(s) * c.Float64s[i]
			case ra.acc().Storage() == stream.Float64: // avg of an Int64 column
				acc.floats[g] += float64(s) * float64(c.Int64s[i])
			default:
				x, sum := c.Int64s[i], acc.ints[g]
				if s > 0 {
					acc.ints[g] = sum + x
					acc.overflow = acc.overflow || addOverflows(sum, x)
				} else {
					acc.ints[g] = sum - x
					acc.overflow = acc.overflow || subOverflows(sum, x)
				}
			}
			acc.nn[g] += s
		}
	}
}

// addOverflows reports whether a+b leaves int64.
func addOverflows(a, b int64) bool {
	r := a + b
	return (b > 0 && r < a) || (b < 0 && r > a)
}

// subOverflows reports whether a-b leaves int64.
func subOverflows(a, b int64) bool {
	r := a - b
	return (b > 0 && r > a) || (b < 0 && r < a)
}

func accInt(kind AggKind, acc *accum, vs []int64, valid []bool, idx []int32) {
	out, nn := acc.ints, acc.nn
	for i, g := range idx {
		if g < 0 || (valid != nil && !valid[i]) {
			continue
		}
		v := vs[i]
		switch kind {
		case Sum, Avg:
			r := out[g] + v
			if (v > 0 && r < out[g]) || (v < 0 && r > out[g]) {
				acc.overflow = true
			}
			out[g] = r
		case Min:
			if nn[g] == 0 || v < out[g] {
				out[g] = v
			}
		case Max:
			if nn[g] == 0 || v > out[g] {
				out[g] = v
			}
		}
		nn[g]++
	}
}

func accFloat(kind AggKind, acc *accum, vs []float64, valid []bool, idx []int32) {
	out, nn := acc.floats, acc.nn
	for i, g := range idx {
		if g < 0 || (valid != nil && !valid[i]) {
			continue
		}
		v := vs[i]
		switch kind {
		case Sum, Avg:
			out[g] += v
		case Min:
			if nn[g] == 0 || floatLess(v, out[g]) {
				out[g] = v
			}
		case Max:
			if nn[g] == 0 || floatLess(out[g], v) {
				out[g] = v
			}
		}
		nn[g]++
	}
}

// floatLess orders NaN above every other value, as Spark's min/max do.
func floatLess(a, b float64) bool {
	if math.IsNaN(a) {
		return false
	}
	return a < b || math.IsNaN(b)
}

// cmpEntries compares entry a of partial pa with entry b of partial pb by
// output key: window start, then the group columns in order, nulls first
// (as the state key orders them).
func (p *plan) cmpEntries(pa *partial, a int32, pb *partial, b int32) int {
	if c := cmp.Compare(pa.start[a], pb.start[b]); c != 0 {
		return c
	}
	for k := range p.groupType {
		var c int
		if na, nb := pa.gNull[k][a], pb.gNull[k][b]; na != nb {
			if na {
				return -1
			}
			return 1
		}
		switch sa, sb := pa.gSid[k], pb.gSid[k]; {
		case pa.strCol[k] && pa == pb && pa.ranked:
			c = cmp.Compare(pa.rank[sa[a]], pa.rank[sb[b]])
		case pa.strCol[k]:
			if pa != pb || sa[a] != sb[b] {
				c = strings.Compare(pa.names[sa[a]], pb.names[sb[b]])
			}
		case p.floatKey(k):
			c = cmp.Compare(math.Float64frombits(uint64(pa.gInt[k][a])), math.Float64frombits(uint64(pb.gInt[k][b])))
		default:
			c = cmp.Compare(pa.gInt[k][a], pb.gInt[k][b])
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// rankNames sets rank to the names' order and keyEnc to their state key
// encodings (ranked), unless there are so many names for the entries
// (high-cardinality strings) that sorting them would cost what comparing
// ranks saves.
func (pt *partial) rankNames() {
	if pt.ranked || 8*len(pt.names) > pt.len() {
		return
	}
	n := len(pt.names)
	pt.rank = slices.Grow(pt.rank[:0], 2*n)[:2*n]
	order := pt.rank[n:] // scratch: the ids in the names' order
	for id := range order {
		order[id] = uint32(id)
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(pt.names[a], pt.names[b]) })
	for r, id := range order {
		pt.rank[id] = uint32(r)
	}
	pt.rank = pt.rank[:n]
	pt.rankBits = 0
	if b := uint(bits.Len(uint(n))); int(b)*len(pt.strCol) <= 64 && !slices.Contains(pt.strCol, false) {
		pt.rankBits = b
	}
	pt.keyEnc, pt.keyEncOff = pt.keyEnc[:0], append(pt.keyEncOff[:0], 0)
	for _, s := range pt.names {
		pt.keyEnc = state.AppendStringKey(pt.keyEnc, s)
		pt.keyEncOff = append(pt.keyEncOff, len(pt.keyEnc))
	}
	pt.ranked = true
}

// keyRuns returns the entries in runs by window start, each run to be
// sorted by its groups (sortRun) before it is read in key order, with ends,
// the ends of the runs (nil: order is in key order already). Windowed
// entries are placed by a counting sort on the window index (starts are
// multiples of the slide; a backfill batch of a year holds ~100k windows
// and its entries arrive interleaved by the parallel file decoding); a
// plan without a window, or windows too sparse for a count per window, is
// sorted whole. Sorting each window's few entries is left to the reader
// (eachInOrder), on the goroutine that builds the state keys: done here,
// on Finish's two cores before its merge could start, it was three
// quarters of the sort, while the key builder waited on the merge loop
// with time to spare. counts is scratch space (returned for reuse; ends is
// part of it).
func (pt *partial) keyRuns(dst, counts []int32) (order, scratch, ends []int32) {
	n := pt.len()
	if n == 0 {
		return dst, counts, nil
	}
	pt.rankNames()
	lo, hi := pt.start[0], pt.start[0]
	for _, s := range pt.start[:n] {
		lo, hi = min(lo, s), max(hi, s)
	}
	slide := max(pt.p.slideUs, 1)
	if !pt.p.window || (hi-lo)/slide >= int64(4*n+1024) {
		for e := range n {
			dst = append(dst, int32(e))
		}
		less := func(a, b int32) int { return pt.p.cmpEntries(pt, a, pt, b) }
		if !slices.IsSortedFunc(dst, less) {
			slices.SortFunc(dst, less)
		}
		return dst, counts, nil
	}
	nb := int((hi-lo)/slide) + 1
	counts = slices.Grow(counts[:0], nb+1)[:nb+1]
	clear(counts)
	for _, s := range pt.start[:n] {
		counts[(s-lo)/slide+1]++
	}
	for b := 1; b <= nb; b++ {
		counts[b] += counts[b-1]
	}
	dst = slices.Grow(dst[:0], n)[:n]
	for e, s := range pt.start[:n] {
		b := (s - lo) / slide
		dst[counts[b]] = int32(e)
		counts[b]++
	}
	// counts[b] is now the end of window b's run (the start of b+1's).
	return dst, counts, counts[:nb]
}

// runKey is an entry of a run and its groups' ranks in one integer.
type runKey struct {
	k uint64
	e int32
}

// sortRun sorts run, entries of one window (keyRuns), by their groups.
func (pt *partial) sortRun(run []int32) {
	if len(run) <= 1 {
		return
	}
	if pt.ranked && pt.rankBits > 0 {
		pt.sortRunRanked(run)
		return
	}
	if len(run) > 12 {
		slices.SortFunc(run, func(a, b int32) int { return pt.p.cmpEntries(pt, a, pt, b) })
		return
	}
	for i := 1; i < len(run); i++ {
		for j := i; j > 0 && pt.p.cmpEntries(pt, run[j-1], pt, run[j]) > 0; j-- {
			run[j-1], run[j] = run[j], run[j-1]
		}
	}
}

// sortRunRanked is sortRun for a ranked partial whose groups are all
// strings: each entry's groups become one integer, a column's rank + 1 (0
// for a null, which orders first) in rankBits bits each, the first column
// highest, so that the sort compares integers where cmpEntries loaded each
// column's null flag, id and rank for both entries at every comparison
// (the seed backfill's (source, miner) runs of ~9 entries: 0.3 of Finish's
// CPU-s went to those comparisons).
func (pt *partial) sortRunRanked(run []int32) {
	keys := slices.Grow(pt.runKeys[:0], len(run))[:len(run)]
	pt.runKeys = keys
	for i, e := range run {
		var k uint64
		for c, sid := range pt.gSid {
			r := uint64(0)
			if !pt.gNull[c][e] {
				r = uint64(pt.rank[sid[e]]) + 1
			}
			k = k<<pt.rankBits | r
		}
		keys[i] = runKey{k, e}
	}
	if len(keys) > 12 {
		slices.SortFunc(keys, func(a, b runKey) int { return cmp.Compare(a.k, b.k) })
	} else {
		for i := 1; i < len(keys); i++ {
			for j := i; j > 0 && keys[j-1].k > keys[j].k; j-- {
				keys[j-1], keys[j] = keys[j], keys[j-1]
			}
		}
	}
	for i := range keys {
		run[i] = keys[i].e
	}
}
