package sparkref

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// A deduplication on a join's side (join_dedup.go): Spark's
// a.withWatermark("ts", d).dropDuplicates(cols).join(b, ...), a
// StreamingDeduplicateExec under the join, on either relation or both.
// The oracle applies it to each relation's rows of a batch, in the order
// the relation reads them, before the join sees them, from Spark's rules
// alone (no code of package dedup):
//
//   - a row at or before the previous batch's watermark is late and
//     dropped (the join would drop it as well);
//   - a row whose key (the columns' values, a null key being a value) is
//     stored is a duplicate and does not reach the join;
//   - otherwise the row passes and its key is stored with the event time
//     it is evicted by: dropDuplicatesWithinWatermark's ts + the
//     relation's delay, dropDuplicates' ts when ts is a key column, none
//     otherwise;
//   - at the end of every batch, the no-data batches included, the keys
//     whose eviction time is at or before the batch's watermark (the
//     query's, as Spark's EventTimeWatermarkExec outputs it under the
//     deduplication) leave.
//
// The watermark itself counts every row a relation reads, duplicates
// included: it is taken below the deduplication.

// JoinDedupColumns are the columns a side's deduplication draws from.
var JoinDedupColumns = [][]string{{"k"}, {"k", "ts"}, {"id"}}

// GenJoinDedup draws a deduplication for each side of c that sides names
// (0 left, 1 right): on k (many duplicates, null keys among them), k and
// ts (evicted by ts), or id (each row once, the second batch's copies of
// a row aside); within the watermark one time in two.
func GenJoinDedup(rng *rand.Rand, c *JoinCase, sides ...int) {
	for _, s := range sides {
		c.Dedup[s] = &Dedup{Columns: JoinDedupColumns[rng.IntN(len(JoinDedupColumns))], WithinWatermark: rng.IntN(2) == 0}
	}
}

// DedupFlags are the --drop-duplicates and
// --drop-duplicates-within-watermark values of c's side deduplications,
// each column qualified by its relation ("a.k, b.id"), "" for none.
func (c JoinCase) DedupFlags() (dropDuplicates, withinWatermark string) {
	var drop, within []string
	for i, d := range c.Dedup {
		if d == nil {
			continue
		}
		for _, col := range d.Columns {
			q := []string{"a", "b"}[i] + "." + col
			if d.WithinWatermark {
				within = append(within, q)
			} else {
				drop = append(drop, q)
			}
		}
	}
	return strings.Join(drop, ", "), strings.Join(within, ", ")
}

// sideDedup is one side's deduplication state in the oracle: each stored
// key with its eviction time in µs (evicts: whether it has one).
type sideDedup struct {
	d       *Dedup
	delayUs int64
	keys    map[string]int64
	evicts  map[string]bool
}

func newSideDedup(d *Dedup, delay time.Duration) *sideDedup {
	if d == nil {
		return nil
	}
	return &sideDedup{d: d, delayUs: delay.Microseconds(), keys: map[string]int64{}, evicts: map[string]bool{}}
}

// pass returns the rows of a batch that reach the join, in order; lateMs
// is the previous batch's watermark.
func (s *sideDedup) pass(rows []JoinRow, lateMs int64) []JoinRow {
	if s == nil {
		return rows
	}
	var out []JoinRow
	for _, r := range rows {
		if r.TS <= lateMs*1000 {
			continue
		}
		var key []string
		hasTS := false
		for _, c := range s.d.Columns {
			switch c {
			case "k":
				if r.Null {
					key = append(key, "null")
				} else {
					key = append(key, "'"+r.K)
				}
			case "ts":
				key, hasTS = append(key, strconv.FormatInt(r.TS, 10)), true
			case "id":
				key = append(key, strconv.FormatInt(r.ID, 10))
			}
		}
		k := strings.Join(key, "|")
		if _, dup := s.keys[k]; dup {
			continue
		}
		switch {
		case s.d.WithinWatermark:
			s.keys[k], s.evicts[k] = r.TS+s.delayUs, true
		case hasTS:
			s.keys[k], s.evicts[k] = r.TS, true
		default:
			s.keys[k] = 0
		}
		out = append(out, r)
	}
	return out
}

// evict drops the keys the watermark wmMs passed.
func (s *sideDedup) evict(wmMs int64) {
	if s == nil {
		return
	}
	for k, us := range s.keys {
		if s.evicts[k] && us <= wmMs*1000 {
			delete(s.keys, k)
			delete(s.evicts, k)
		}
	}
}

// duckDedup is side's relation deduplicated as a batch engine does it,
// for DuckDB: the first row of each key in the order the stream reads
// them (file by file, a file's rows in order; a null key is a value, as
// PARTITION BY groups nulls). It equals the stream's deduplication when
// no key is evicted before its duplicates arrive (hour-long delays).
func (c JoinCase) duckDedup(side int, glob string) string {
	return fmt.Sprintf("(SELECT k, ts, id FROM (SELECT *, row_number() OVER (PARTITION BY %s ORDER BY filename, file_row_number) AS first_ "+
		"FROM read_parquet('%s', filename=true, file_row_number=true) WHERE k IS NULL OR k NOT LIKE '%s%%') WHERE first_ = 1)",
		strings.Join(c.Dedup[side].Columns, ", "), glob, SentinelKey)
}
