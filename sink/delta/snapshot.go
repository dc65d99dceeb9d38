package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/deltalog"
)

// Snapshot is the state of a table at one version. Snapshots returned by
// Table.Snapshot are immutable and safe for concurrent reads.
type Snapshot struct {
	Version  int64
	Protocol Protocol
	Metadata Metadata
	Schema   Schema

	table      *Table
	files      map[string]*AddFile    // live files by decoded path
	tombstones map[string]*RemoveFile // removes by decoded path
	txns       map[string]Txn
	hasProto   bool
	hasMeta    bool

	rangeMu sync.Mutex
	ranges  map[*AddFile]fileRange // parsed stats of live files, filled lazily
	// keyRanges are the key columns' stats of live files for keyLayout
	// (prune.go), filled lazily.
	keyLayout *outLayout
	keyRanges map[*AddFile][]leafRange
}

// rangeOf returns the pruning range of a live file, parsing its stats once
// per snapshot (a live batch checks every file's range).
func (s *Snapshot) rangeOf(f *AddFile) fileRange {
	s.rangeMu.Lock()
	defer s.rangeMu.Unlock()
	if r, ok := s.ranges[f]; ok {
		return r
	}
	if s.ranges == nil {
		s.ranges = map[*AddFile]fileRange{}
	}
	r := rangeOf(f)
	s.ranges[f] = r
	return r
}

// forgetRange drops the parsed stats of a file no longer live.
func (s *Snapshot) forgetRange(f *AddFile) {
	s.rangeMu.Lock()
	delete(s.ranges, f)
	delete(s.keyRanges, f)
	s.rangeMu.Unlock()
}

func newSnapshot(t *Table) *Snapshot {
	return &Snapshot{
		Version:    -1,
		table:      t,
		files:      map[string]*AddFile{},
		tombstones: map[string]*RemoveFile{},
		txns:       map[string]Txn{},
	}
}

// applyAll reconciles actions in log order: the last protocol and metaData
// win, the last txn per appId wins, and add/remove replace each other by path.
func (s *Snapshot) applyAll(acts []action) {
	for i := range acts {
		a := &acts[i]
		switch {
		case a.Add != nil:
			p := decodePath(a.Add.Path)
			if old, ok := s.files[p]; ok {
				s.forgetRange(old)
			}
			delete(s.tombstones, p)
			s.files[p] = a.Add
		case a.Remove != nil:
			p := decodePath(a.Remove.Path)
			if old, ok := s.files[p]; ok {
				s.forgetRange(old)
			}
			delete(s.files, p)
			s.tombstones[p] = a.Remove
		case a.Txn != nil:
			s.txns[a.Txn.AppID] = *a.Txn
		case a.MetaData != nil:
			s.Metadata = *a.MetaData
			s.hasMeta = true
			s.Schema, _ = ParseSchema(a.MetaData.SchemaString) // validated when parsed
		case a.Protocol != nil:
			s.Protocol = *a.Protocol
			s.hasProto = true
		}
	}
}

// check validates the replayed state: protocol and metaData present and a
// protocol we can read.
func (s *Snapshot) check() error {
	return deltalog.Replayed{Version: s.Version, Protocol: s.Protocol, Metadata: s.Metadata,
		HasProtocol: s.hasProto, HasMetadata: s.hasMeta}.Check(s.table.log)
}

func checkReadProtocol(p Protocol, path string) error { return deltalog.CheckReadProtocol(p, path) }

func checkWriteProtocol(p Protocol, path string) error {
	if err := checkReadProtocol(p, path); err != nil {
		return err
	}
	if p.MinWriterVersion > WriterVersion && !onlyNtz(p.MinWriterVersion, 7, p.WriterFeatures) {
		return errcode.New(CodeUnsupportedProtocol, path, remedyProtocol,
			"table needs writer version %d with features %v; ethstream writes version %d without features",
			p.MinWriterVersion, p.WriterFeatures, WriterVersion)
	}
	return nil
}

// Files returns the live files, sorted by path.
func (s *Snapshot) Files() []AddFile { return deltalog.SortedAdds(s.files) }

// Tombstones returns the remove actions still in the state, sorted by path.
func (s *Snapshot) Tombstones() []RemoveFile { return deltalog.SortedRemoves(s.tombstones) }

// Txn returns the last committed version for appID.
func (s *Snapshot) Txn(appID string) (int64, bool) {
	t, ok := s.txns[appID]
	return t.Version, ok
}

// NumRecords sums numRecords over the live files' stats; ok is false if any
// live file has no stats.
func (s *Snapshot) NumRecords() (n int64, ok bool) {
	for _, f := range s.files {
		st, err := parseStats(f.Stats)
		if err != nil || st.NumRecords == nil {
			return n, false
		}
		n += *st.NumRecords
	}
	return n, true
}

// filePath maps a log path to a local file: relative paths are decoded once
// and joined to the root; absolute file:// URIs are used as they are.
func (t *Table) filePath(logPath string) string {
	if strings.HasPrefix(logPath, "file:") {
		if r, err := resolveRoot(logPath); err == nil {
			return r
		}
	}
	return t.fs.PathJoin(t.root, filepath.FromSlash(decodePath(logPath)))
}

// checkFiles verifies that every live file can be read before a scan starts,
// so a scan never returns part of a table.
func (s *Snapshot) checkFiles(files []AddFile) error {
	for _, f := range files {
		if len(f.DeletionVector) > 0 && string(f.DeletionVector) != "null" {
			return errcode.New(CodeUnsupportedFeature, s.table.filePath(f.Path), remedyProtocol, "file has a deletion vector")
		}
		p := s.table.filePath(f.Path)
		st, err := s.table.fs.Stat(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return errcode.Wrap(err, CodeMissingFile, p,
					"restore the file, or restore the table to a version that does not reference it",
					"live data file of version %d is missing", s.Version)
			}
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if f.Size > 0 && st.Size() != f.Size {
			return errcode.New(CodeCorruptFile, p,
				"restore the file, or restore the table to a version that does not reference it",
				"live data file of version %d has %d bytes, its add action records %d", s.Version, st.Size(), f.Size)
		}
	}
	return nil
}

// Rows calls fn for every live row: one map per row keyed by top-level
// column name, in the shape of Schema (structs as map[string]any, arrays as
// []any, timestamps as time.Time, dates as "YYYY-MM-DD", integers int64).
// Partition values come from the log; columns a file lacks are nil. Files are
// read in path order. fn must not keep the map after it returns.
func (s *Snapshot) Rows(ctx context.Context, fn func(row map[string]any) error) error {
	files := s.Files()
	if err := s.checkFiles(files); err != nil {
		return err
	}
	partCols := map[string]bool{}
	for _, c := range s.Metadata.PartitionColumns {
		partCols[c] = true
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		pvals := map[string]any{}
		for _, fld := range s.Schema.Fields {
			if !partCols[fld.Name] {
				continue
			}
			v, err := partitionValue(fld.Type, f.PartitionValues[fld.Name])
			if err != nil {
				return corrupt(s.table.logDir, err, "partition value of %s in file %s", fld.Name, f.Path)
			}
			pvals[fld.Name] = v
		}
		p := s.table.filePath(f.Path)
		out := make(map[string]any, len(s.Schema.Fields))
		err := readGenericRows(s.table.fs, p, func(raw map[string]any) error {
			for _, fld := range s.Schema.Fields {
				if partCols[fld.Name] {
					out[fld.Name] = pvals[fld.Name]
					continue
				}
				out[fld.Name] = conform(fld.Type, raw[fld.Name])
			}
			return fn(out)
		})
		if err != nil {
			var ce *errcode.Error
			if errors.As(err, &ce) || errors.Is(err, context.Canceled) {
				return err
			}
			return dataFileError(err, p, "restore the file from a backup", "read data file")
		}
	}
	return nil
}

// fileStats is the parsed add.stats JSON.
type fileStats struct {
	NumRecords *int64          `json:"numRecords"`
	MinValues  map[string]any  `json:"minValues"`
	MaxValues  map[string]any  `json:"maxValues"`
	NullCount  map[string]any  `json:"nullCount"`
	TightBound *bool           `json:"tightBounds,omitempty"`
	Extra      json.RawMessage `json:"-"`
}

func parseStats(s string) (fileStats, error) {
	var st fileStats
	if s == "" {
		return st, nil
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	err := d.Decode(&st)
	return st, err
}

// formatStatsTime renders a timestamp the way Spark writes it in stats:
// ISO-8601 UTC, cut (not rounded) to milliseconds.
func formatStatsTime(t time.Time) string { return deltalog.FormatStatsTime(t) }

// onlyNtz reports whether a protocol at version v (the table-features
// version featuresAt) names no feature but timestampNtz (deltalog.OnlyNtz).
func onlyNtz(v, featuresAt int, features []string) bool {
	return deltalog.OnlyNtz(v, featuresAt, features)
}
