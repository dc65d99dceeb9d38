package deltalog

import (
	"context"
	"sort"
)

// Snapshot is what a reader sees of a table at one version: its protocol,
// metaData, schema and live files. sink/delta's Snapshot is the writer's,
// with txns, tombstones and the pruning caches; both replay through
// Log.Replay. A Snapshot is immutable once returned, safe for concurrent
// reads.
type Snapshot struct {
	Version  int64
	Protocol Protocol
	Metadata Metadata
	Schema   Schema
	files    map[string]*AddFile // live files by decoded path
}

// Snapshot replays the log up to version (-1 = latest).
func (l *Log) Snapshot(ctx context.Context, version int64) (*Snapshot, error) {
	ls, err := l.List()
	if err != nil {
		return nil, err
	}
	target, err := l.Target(ls, version)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Version: -1, files: map[string]*AddFile{}}
	err = l.Replay(ctx, ls, target, func(v int64, acts []Action) {
		s.Version = v
		for i := range acts {
			a := &acts[i]
			switch {
			case a.Add != nil:
				s.files[DecodePath(a.Add.Path)] = a.Add
			case a.Remove != nil:
				delete(s.files, DecodePath(a.Remove.Path))
			case a.MetaData != nil:
				s.Metadata = *a.MetaData
				s.Schema, _ = ParseSchema(a.MetaData.SchemaString) // validated when parsed
			case a.Protocol != nil:
				s.Protocol = *a.Protocol
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Files returns the live files, sorted by path.
func (s *Snapshot) Files() []AddFile { return SortedAdds(s.files) }

// SortedAdds returns copies of a replay's add actions, sorted by path: a
// reader's and the writer's snapshots list their live files through it.
func SortedAdds(m map[string]*AddFile) []AddFile {
	out := make([]AddFile, 0, len(m))
	for _, f := range m {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// SortedRemoves returns copies of a replay's remove actions, sorted by path.
func SortedRemoves(m map[string]*RemoveFile) []RemoveFile {
	out := make([]RemoveFile, 0, len(m))
	for _, f := range m {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
