package demo

import (
	"fmt"
	"path/filepath"
	"time"
)

// The freshness run's retentions (freshnessTableProps) and how the run
// judges "bounded" and "flat" (docs/contracts.md, Targets: table files,
// checkpoint files and RSS over the run).
const (
	// freshnessRetention is the table's log and deleted-file retention
	// (freshnessTableProps).
	freshnessRetention = time.Minute
	// boundedGrowth: the file counts at the end may exceed those at the
	// run's midpoint by at most this factor. Once the retentions are in
	// force the counts stop growing; unbounded growth (a file per batch
	// kept forever) doubles them from midpoint to end.
	boundedGrowth = 1.25
	// flatRSS: RSS at the end over RSS after the first batch.
	flatRSS = 1.5
)

// fileCounts is a sample of the run's file counts.
type fileCounts struct {
	AtMs       int64 `json:"atMs"` // since the first measured batch
	TableFiles int   `json:"tableDataFiles"`
	LogFiles   int   `json:"tableLogFiles"`
	CkptFiles  int   `json:"checkpointFiles"`
}

// countRun counts the table's and the checkpoint's files under dir.
func countRun(dir string, at time.Duration) fileCounts {
	c := fileCounts{AtMs: at.Milliseconds()}
	c.TableFiles, c.LogFiles = countTable(filepath.Join(dir, "table"))
	c.CkptFiles = countFiles(filepath.Join(dir, "checkpoint"))
	return c
}

// freshnessTargets judges a freshness run against docs/contracts.md's
// head-to-table targets. The file counts are judged only when the run's
// midpoint came at least two retentions after its start: before that the
// counts still grow by design.
func freshnessTargets(r *FreshnessResult) []Target {
	// Another query than the reference names itself in its rows, so that
	// several runs' targets stay apart in one table.
	of := ""
	if r.Query != "" && r.Query != "reference" {
		of = " (query " + r.Query + ")"
	}
	ts := []Target{
		atMost("head to table, p50"+of, "<= 25 ms", r.P50Ms, 25, fmt.Sprintf("%.1f ms", r.P50Ms)),
		atMost("head to table, p99"+of, "<= 100 ms", r.P99Ms, 100, fmt.Sprintf("%.1f ms", r.P99Ms)),
	}
	if r.RSSStart > 0 && r.RSSEnd > 0 {
		g := float64(r.RSSEnd) / float64(r.RSSStart)
		ts = append(ts, atMost("RSS, end over after the first batch", fmt.Sprintf("<= %.2gx (flat)", flatRSS), g, flatRSS,
			fmt.Sprintf("%.0f -> %.0f MB (%.2fx)", float64(r.RSSStart)/1e6, float64(r.RSSEnd)/1e6, g)))
	} else {
		ts = append(ts, notMeasured("RSS, end over after the first batch", fmt.Sprintf("<= %.2gx (flat)", flatRSS), "RSS unknown on this OS"))
	}
	limit := fmt.Sprintf("<= %.2gx of the midpoint (bounded)", boundedGrowth)
	mid, end := r.Mid, fileCounts{TableFiles: r.TableFiles, LogFiles: r.LogFiles, CkptFiles: r.CkptFiles}
	for _, f := range []struct {
		name     string
		mid, end int
	}{
		{"table data files + _delta_log entries, end over midpoint", mid.TableFiles + mid.LogFiles, end.TableFiles + end.LogFiles},
		{"checkpoint files, end over midpoint", mid.CkptFiles, end.CkptFiles},
	} {
		if at := time.Duration(mid.AtMs) * time.Millisecond; at < 2*freshnessRetention || f.mid == 0 {
			ts = append(ts, notMeasured(f.name, limit, fmt.Sprintf("midpoint at %.0f s, before two retentions (%.0f s): run more blocks",
				at.Seconds(), (2*freshnessRetention).Seconds())))
			continue
		}
		g := float64(f.end) / float64(f.mid)
		ts = append(ts, atMost(f.name, limit, g, boundedGrowth, fmt.Sprintf("%d -> %d (%.2fx)", f.mid, f.end, g)))
	}
	for i := 2; i < len(ts); i++ {
		ts[i].Name += of
	}
	return ts
}
