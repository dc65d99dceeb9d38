package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/internal/sparkref"
	"github.com/ethstream/ethstream/sink/delta"
)

// unionSources are the sources each relation of round n unions: the left
// one starts on lhs1, adds lhs2 in round 1 and retires lhs1 from round 2;
// the right one does the same a round later (rhs1, then rhs1 and rhs2,
// then rhs2).
func unionSources(n int) (left, right []string) {
	switch {
	case n == 0:
		left = []string{"lhs1"}
	case n == 1:
		left = []string{"lhs1", "lhs2"}
	default:
		left = []string{"lhs2"}
	}
	switch {
	case n <= 1:
		right = []string{"rhs1"}
	case n == 2:
		right = []string{"rhs1", "rhs2"}
	default:
		right = []string{"rhs2"}
	}
	return left, right
}

// unionRel is a relation of those sources in SQL: the source itself, or
// Spark SQL's union in FROM.
func unionRel(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	sel := make([]string, len(names))
	for i, n := range names {
		sel[i] = "SELECT * FROM " + n
	}
	return "(" + strings.Join(sel, " UNION ALL ") + ")"
}

// TestJoinUnionSourceEvolution: each relation of a SQL join is a union of
// named sources (FROM (SELECT * FROM lhs1 UNION ALL SELECT * FROM lhs2)
// WATERMARK ... AS a), and source evolution runs on either side between
// runs: a source added to a relation starts from its configured start, a
// retired one is tombstoned, each round's rows split across the sources
// the relation reads then. Generated joins (late and out-of-order rows,
// null keys, a restart per round on another state partition count) equal
// the oracle of internal/sparkref, which sees each relation as the rows
// it reads whichever source they come from.
func TestJoinUnionSourceEvolution(t *testing.T) {
	for _, typ := range []string{"FULL OUTER JOIN", "LEFT SEMI JOIN"} {
		t.Run(strings.ReplaceAll(typ, " ", "_"), func(t *testing.T) {
			c := sparkref.GenJoin(rand.New(rand.NewPCG(3, 41)), typ, false)
			root := t.TempDir()
			spec := func(name string) SourceSpec {
				return SourceSpec{Name: name, Format: "parquet", URI: "file://" + filepath.ToSlash(filepath.Join(root, name)) + "?maxFilesPerTrigger=1&schema=" +
					url.QueryEscape("k STRING, ts TIMESTAMP, id BIGINT")}
			}
			ckpt := filepath.Join(root, "ckpt")
			for n, rd := range c.Rounds {
				left, right := unionSources(n)
				// Each source the relation reads in this round gets a part of
				// its rows (the first the first half), and of its second
				// batch's rows, if any, as a second file.
				for f, rows := range [][2][]sparkref.JoinRow{{rd.Left, rd.Right}, {rd.Left2, rd.Right2}} {
					if f > 0 && len(rows[0])+len(rows[1]) == 0 {
						continue
					}
					for r, names := range [][]string{left, right} {
						if f > 0 && len(rows[r]) == 0 {
							continue
						}
						cut := len(rows[r]) / len(names)
						for i, name := range names {
							part := rows[r][i*cut:]
							if i+1 < len(names) {
								part = rows[r][i*cut : (i+1)*cut]
							}
							writeJoinFile(t, filepath.Join(root, name, fmt.Sprintf("r=%d", n), fmt.Sprintf("part-%d.parquet", f)), part)
						}
					}
				}
				query := strings.Replace(strings.Replace(c.SQL(), "FROM lhs WATERMARK", "FROM "+unionRel(left)+" WATERMARK", 1),
					"JOIN rhs WATERMARK", "JOIN "+unionRel(right)+" WATERMARK", 1)
				var sources []SourceSpec
				for _, name := range append(slices.Clone(left), right...) {
					sources = append(sources, spec(name))
				}
				cfg := Config{Checkpoint: ckpt, Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "local"),
					Sources: sources, Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
					OutputMode: "append", Query: query,
					Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "4",
						"spark.sql.streaming.stateStore.partitions": strconv.Itoa(rd.Partitions)}}
				if _, err := Run(context.Background(), cfg); err != nil {
					t.Fatalf("round %d: %v\n%s", n, err, query)
				}
			}
			if len(c.Rounds) < 4 {
				t.Fatalf("%d rounds: too few to add and retire a source on each side", len(c.Rounds))
			}
			snap, err := (checkpoint.Dir{FS: vfs.Default, Path: ckpt}).ReadSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			tomb := snap.Latest.Metadata.Tombstones
			if _, ok := tomb["lhs1"]; !ok {
				t.Fatalf("lhs1 retired from the left relation is not tombstoned: %v", tomb)
			}
			if _, ok := tomb["rhs1"]; !ok {
				t.Fatalf("rhs1 retired from the right relation is not tombstoned: %v", tomb)
			}
			tb, err := delta.Open(context.Background(), filepath.Join(root, "table"))
			if err != nil {
				t.Fatal(err)
			}
			ts, err := tb.Snapshot(context.Background(), -1)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if err := ts.Rows(context.Background(), func(row map[string]any) error {
				got = append(got, renderJoinRow(row))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			sameJoinRows(t, c.SQL(), got, c.Oracle())
		})
	}
}
