package query

// Spark's withWatermark marks its column with EventTimeWatermark metadata,
// and an Alias of a column keeps its child's metadata: a subquery's
// block_ts AS ts is still the event time, and a window over ts closes by
// the watermark of block_ts. A computed column (block_ts + INTERVAL ...)
// is a new column without the metadata.

// aliasOf reports whether the subquery's rows carry the read path's
// column col as name: col itself, or renamed (AS, at any depth) by the
// projections of the subquery's steps, never computed.
func (r *resolver) aliasOf(col, name string) bool {
	if r.in == nil {
		return false
	}
	names := map[string]bool{col: true}
	for _, s := range r.in.c.Steps {
		if s.Aggregate != nil {
			return false // its output is the aggregation's, not the rows read
		}
		if s.Project == nil {
			continue
		}
		next := map[string]bool{}
		for _, c := range s.Project {
			if !c.WindowTime && names[c.Name] {
				next[c.Out()] = true
			}
		}
		names = next
	}
	return names[name]
}
