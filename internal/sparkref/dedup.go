package sparkref

import (
	"math/rand/v2"
	"strings"

	"github.com/ethstream/ethstream/stream"
)

// Dedup is a deduplication before the aggregation: Spark's
// df.dropDuplicates(Columns) or df.dropDuplicatesWithinWatermark(Columns)
// on the rows read (ethstream's --drop-duplicates and
// --drop-duplicates-within-watermark), operator 0 of the plan.
type Dedup struct {
	Columns         []string
	WithinWatermark bool
}

// Flags are the --drop-duplicates and --drop-duplicates-within-watermark
// values of q's deduplication ("" for none).
func (q *Query) Flags() (dropDuplicates, withinWatermark string) {
	if q.Dedup == nil {
		return "", ""
	}
	cols := strings.Join(q.Dedup.Columns, ", ")
	if q.Dedup.WithinWatermark {
		return "", cols
	}
	return cols, ""
}

// Dedup draws, one query in three, a deduplication for q on one or two
// columns a state key can hold (no DOUBLE: a null one is refused), the
// event time among them at times (dropDuplicates then evicts by it);
// WithinWatermark only under a watermark, which it needs. It draws from
// its own rng, so a seed's query and batches stay those it drew without.
func (g *Gen) Dedup(rng *rand.Rand, q *Query) {
	if rng.IntN(3) != 0 {
		return
	}
	d := &Dedup{WithinWatermark: q.hasWatermark() && rng.IntN(2) == 0}
	cols := g.cols(stream.String, stream.Int64, stream.Timestamp)
	for _, c := range g.newCols() {
		if c.Type != stream.Float32 { // a null FLOAT key is refused (docs/contracts.md)
			cols = append(cols, c)
		}
	}
	for range 1 + rng.IntN(2) {
		c := pick(rng, cols).Name
		if !containsStr(d.Columns, c) {
			d.Columns = append(d.Columns, c)
		}
	}
	if q.hasWatermark() && rng.IntN(4) == 0 && !containsStr(d.Columns, q.WatermarkColumn) {
		d.Columns = append(d.Columns, q.WatermarkColumn)
	}
	q.Dedup = d
}

// dedupState is the oracle's deduplication, written from Spark's rules
// (statefulOperators.scala): a row whose event time is at or before the
// previous batch's watermark (watermarkPredicateForDataForLateEvents) is
// late and dropped; a row whose key (the columns'
// values, a null being a value) is stored is a duplicate and dropped;
// otherwise it passes and its key is stored, with the event time it is
// evicted by: dropDuplicatesWithinWatermark's event time + delay (0 for a
// null one), dropDuplicates' event-time column when it is a key column
// (never otherwise). At the end of each batch the keys whose eviction time
// is at or before the batch's own watermark leave
// (watermarkPredicateForKeysForEviction).
type dedupState struct {
	d       *Dedup
	idx     []int
	ts      int // the event-time column's index, -1 without a watermark
	delayUs int64
	// keys maps a stored key to its eviction time in µs; evicts says
	// whether it has one.
	keys   map[string]int64
	evicts map[string]bool
	// dropped counts the rows dropped as duplicates, late the rows dropped
	// as late, readmitted the keys passed again after their eviction (the
	// answer then depends on the batches, not only on arrival order).
	dropped, late, readmitted int
	gone                      map[string]bool
}

func newDedupState(q *Query, idx map[string]int) *dedupState {
	if q.Dedup == nil {
		return nil
	}
	s := &dedupState{d: q.Dedup, ts: -1, keys: map[string]int64{}, evicts: map[string]bool{}, delayUs: q.Watermark.Microseconds()}
	for _, c := range q.Dedup.Columns {
		s.idx = append(s.idx, idx[c])
	}
	if q.hasWatermark() {
		s.ts = idx[q.WatermarkColumn]
	}
	return s
}

// keep reports whether row r passes the deduplication in a batch whose
// late-event watermark (the previous batch's) is wmMs, storing its key
// when it does.
func (s *dedupState) keep(r Row, wmMs int64) bool {
	var ts any
	if s.ts >= 0 {
		ts = r[s.ts]
		if ts != nil && ts.(int64) <= wmMs*1000 {
			s.late++
			return false // late
		}
	}
	key := make([]any, len(s.idx))
	for i, c := range s.idx {
		key[i] = r[c]
	}
	k := KeyText(key)
	if _, dup := s.keys[k]; dup {
		s.dropped++
		return false
	}
	if s.gone[k] {
		s.readmitted++
	}
	switch {
	case s.d.WithinWatermark:
		exp := int64(0)
		if ts != nil {
			exp = ts.(int64) + s.delayUs
		}
		s.keys[k], s.evicts[k] = exp, true
	case s.ts >= 0 && ts != nil && containsInt(s.idx, s.ts):
		s.keys[k], s.evicts[k] = ts.(int64), true
	default:
		s.keys[k] = 0
	}
	return true
}

// evict drops the keys the batch's watermark closed.
func (s *dedupState) evict(wmMs int64) {
	for k, us := range s.keys {
		if s.evicts[k] && us <= wmMs*1000 {
			if s.gone == nil {
				s.gone = map[string]bool{}
			}
			s.gone[k] = true
			delete(s.keys, k)
			delete(s.evicts, k)
		}
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
