package agg

import (
	"encoding/binary"
	"fmt"

	"github.com/ethstream/ethstream/agg/hllpp"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// ApproxCountDistinct is Spark's approx_count_distinct(col[, relativeSD]):
// HyperLogLog++ (package hllpp, Spark's estimate for the same input), of
// any scalar column, a BIGINT that is never null (0 for no non-null
// input). Its state value is the group's registers (doc.go, State
// layout); registers merge by maximum, so batches, shards and partitions
// fold in any order to the same value. It cannot be undone by a
// retraction (the registers keep no rows), so it is refused with
// retractions as min and max are.
const ApproxCountDistinct AggKind = 6

// planSketch resolves an approx_count_distinct: its precision from
// RelativeSD and its input type.
func planSketch(ra *resolvedAgg) error {
	if !hllpp.Hashable(ra.in) {
		return errcode.New(CodeDatatypeMismatch, "", "count a scalar column",
			"approx_count_distinct(%s): column is %s", ra.Column, ra.in)
	}
	rsd := ra.RelativeSD
	if rsd == 0 {
		rsd = hllpp.DefaultRelativeSD
	}
	p, err := hllpp.Precision(rsd)
	if err != nil {
		return errcode.New(errcode.InvalidArgument, "", fmt.Sprintf("use a relativeSD between %v and 0.39 (default 0.05)", hllpp.MinRelativeSD),
			"approx_count_distinct(%s, %v): %s", ra.Column, rsd, err)
	}
	ps := hllpp.New(p)
	ra.sketch, ra.out = &ps, stream.Int64
	return nil
}

// sketchArg is the spec text's record of the precision, which shapes the
// state value: ",p=9" (empty for the other aggregates, whose text is
// unchanged).
func (a *resolvedAgg) sketchArg() string {
	if a.sketch == nil {
		return ""
	}
	return fmt.Sprintf(",p=%d", a.sketch.P())
}

// sketchAccum is a partial's registers of one approx_count_distinct:
// words per entry, entry e at regs[e*words:(e+1)*words].
type sketchAccum struct {
	regs   []uint64
	hasher *hllpp.Hasher
	hashed stream.Type
}

func (s *sketchAccum) reset() { s.regs = s.regs[:0] }

// grow adds an entry of empty registers.
func (s *sketchAccum) grow(ps *hllpp.Params) {
	for range ps.Words() {
		s.regs = append(s.regs, 0)
	}
}

func (s *sketchAccum) entry(ps *hllpp.Params, e int) hllpp.Sketch {
	w := ps.Words()
	return s.regs[e*w : (e+1)*w : (e+1)*w]
}

// add folds the chunk's non-null values of c into the entries idx maps
// each row to (-1: skipped).
func (s *sketchAccum) add(ra *resolvedAgg, c *stream.Column, idx []int32) {
	if s.hasher == nil || s.hashed != c.Type {
		s.hasher, s.hashed = hllpp.NewHasher(c.Type), c.Type
	}
	ps, w := ra.sketch, ra.sketch.Words()
	for i, g := range idx {
		if g < 0 || c.IsNull(i) {
			continue
		}
		ps.Add(s.regs[int(g)*w:(int(g)+1)*w], s.hasher.Row(c, i))
	}
}

// mergeInto merges entry e's registers into v's.
func (s *sketchAccum) mergeInto(ra *resolvedAgg, e int, v *aggVal) {
	if v.hll == nil {
		v.hll = ra.sketch.NewSketch()
	}
	ra.sketch.Merge(v.hll, s.entry(ra.sketch, e))
}

// appendSketchValue appends registers as a state String value (their
// length, then hllpp's encoding); nil registers are empty ones.
func appendSketchValue(dst []byte, ra *resolvedAgg, regs hllpp.Sketch) []byte {
	if regs == nil {
		regs = ra.sketch.NewSketch()
	}
	dst = binary.AppendUvarint(dst, uint64(ra.sketch.EncodedLen()))
	return regs.Encode(dst)
}

// readSketchValue reads appendSketchValue's bytes into v and returns the
// rest, false when they are not registers of ra's precision.
func readSketchValue(val []byte, ra *resolvedAgg, v *aggVal) ([]byte, bool) {
	n, k := binary.Uvarint(val)
	if k <= 0 || n != uint64(ra.sketch.EncodedLen()) || uint64(len(val)-k) < n {
		return val, false
	}
	if len(v.hll) != ra.sketch.Words() {
		v.hll = ra.sketch.NewSketch()
	}
	if !ra.sketch.Decode(v.hll, val[k:k+int(n)]) {
		return val, false
	}
	return val[k+int(n):], true
}

// sketchEstimate is the output value: Spark's estimate (0 for none).
func sketchEstimate(ra *resolvedAgg, regs hllpp.Sketch) int64 {
	if regs == nil {
		return 0
	}
	return ra.sketch.Estimate(regs)
}

// refuseSketches refuses approx_count_distinct where the aggregates run one
// row at a time (Buffers: session windows), which keep no registers.
func refuseSketches(p *plan) error {
	for _, a := range p.aggs {
		if a.sketch != nil {
			return errcode.New(CodeDatatypeMismatch, "", "use count(DISTINCT ...) in a batch query, or approx_count_distinct over a time window",
				"approx_count_distinct(%s) over session windows is not supported", a.Column)
		}
	}
	return nil
}
