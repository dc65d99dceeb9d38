package pipeline

import (
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/query"
	"github.com/ethstream/ethstream/stream"
)

// joinDedups applies --drop-duplicates and --drop-duplicates-within-watermark
// to a join's relations, as df.dropDuplicates(cols) called on each side
// before the join (Spark's StreamingDeduplicateExec under the
// StreamingSymmetricHashJoinExec; flow.Side.DropDuplicates): a column
// qualified by a relation (a.k) deduplicates that relation only, an
// unqualified one every relation, each of which must have it. A relation
// left with no column is not deduplicated; a relation given both flags is
// refused (one deduplication per side).
func joinDedups(cfg Config, jq *query.JoinQuery, sides [2]*flow.Side, schemas [2]stream.Schema) error {
	for _, f := range []struct {
		flag   string
		cols   string
		within bool
	}{{"--drop-duplicates", cfg.DropDuplicates, false}, {"--drop-duplicates-within-watermark", cfg.DropDuplicatesWithinWatermark, true}} {
		if f.cols == "" {
			continue
		}
		var per [2][]string
		for _, c := range dedupColumns(f.cols) {
			qual, col, ok := strings.Cut(c, ".")
			if !ok {
				qual, col = "", c
			}
			matched := false
			for i, rel := range jq.Rels {
				if qual != "" && !strings.EqualFold(qual, rel.Ref()) {
					continue
				}
				matched = true
				if schemas[i].Field(col) == nil {
					return errcode.New(errcode.UnresolvedColumn, "", "qualify the column by the relation that has it ("+rel.Ref()+"."+col+" is not one), or leave it out of "+f.flag,
						"%s %s: relation %s has no column %q", f.flag, c, rel.Ref(), col)
				}
				if !containsFold(per[i], col) {
					per[i] = append(per[i], col)
				}
			}
			if !matched {
				return errcode.New(errcode.UnresolvedColumn, "", "qualify the column by "+jq.Rels[0].Ref()+" or "+jq.Rels[1].Ref(),
					"%s %s: %s is neither relation of the join", f.flag, c, qual)
			}
		}
		for i, cols := range per {
			if len(cols) == 0 {
				continue
			}
			if f.within {
				sides[i].DropDuplicatesWithinWatermark(cols...)
			} else {
				sides[i].DropDuplicates(cols...)
			}
			if _, err := sides[i].Schema(); err != nil {
				return err
			}
		}
	}
	return nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
