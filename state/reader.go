package state

import (
	"context"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// LatestVersion returns the newest version with a metadata file in dir, or -1
// if there is none. The engine's commit log, not this, says which versions
// are committed batches: a version above the latest committed batch belongs
// to a batch that will re-run.
func LatestVersion(fs vfs.FS, dir string) (int64, error) {
	cat, err := listCatalog(fs, dir)
	if err != nil {
		return -1, err
	}
	vs := cat.versions()
	if len(vs) == 0 {
		return -1, nil
	}
	return vs[len(vs)-1], nil
}

// LatestVersionAtMost returns the newest version ≤ limit with a metadata
// file in dir, or -1 if there is none.
func LatestVersionAtMost(fs vfs.FS, dir string, limit int64) (int64, error) {
	cat, err := listCatalog(fs, dir)
	if err != nil {
		return -1, err
	}
	vs := cat.versions()
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i] <= limit {
			return vs[i], nil
		}
	}
	return -1, nil
}

// VersionInfo describes one stored version (from its metadata file).
type VersionInfo struct {
	Version    int64
	Partitions int
	Rows       int64
	Snapshot   bool
	Schema     Schema
}

// Stat returns the metadata of version v in dir.
func Stat(fs vfs.FS, dir string, v int64) (VersionInfo, error) {
	cat, err := listCatalog(fs, dir)
	if err != nil {
		return VersionInfo{}, err
	}
	a, ok := cat.latestAttempt(v)
	if !ok {
		return VersionInfo{}, errcode.New(CodeStateNotFound, dir, "check --batch, or run the query first",
			"state version %d not found", v)
	}
	m, err := readMeta(fs, dir, v, a)
	if err != nil {
		return VersionInfo{}, err
	}
	return VersionInfo{Version: v, Partitions: m.Partitions, Rows: m.Rows, Snapshot: m.Kind == kindNameSnapshot, Schema: m.Schema}, nil
}

type readEntry struct {
	part int
	val  []byte
}

// ReadAll reads version (-1 = the latest) of the state in dir from the
// checkpoint files alone (no Pebble, no cache) and calls fn for every row in
// (partition, key) order with the decoded key and value rows (see DecodeKey).
// It returns the version's schema. A missing version is STATE_NOT_FOUND; a
// damaged file CHECKPOINT_CORRUPT.
func ReadAll(ctx context.Context, fs vfs.FS, dir string, version int64,
	fn func(partition int, key, val []any) error) (Schema, error) {
	var schema Schema
	_, schema, err := readRaw(ctx, fs, dir, version, func(sc Schema) { schema = sc }, func(p int, k, v []byte) error {
		kv, err := DecodeKey(schema.Key, k)
		if err != nil {
			return errcode.Corrupt(dir, err, "decode state key %x", k)
		}
		vv, err := DecodeValue(schema.Value, v)
		if err != nil {
			return errcode.Corrupt(dir, err, "decode state value of key %x", k)
		}
		return fn(p, kv, vv)
	})
	return schema, err
}

// ReadAllRaw is ReadAll with encoded keys and values, returning the version
// read.
func ReadAllRaw(ctx context.Context, fs vfs.FS, dir string, version int64,
	fn func(partition int, key, val []byte) error) (int64, Schema, error) {
	return readRaw(ctx, fs, dir, version, nil, fn)
}

func readRaw(ctx context.Context, fs vfs.FS, dir string, version int64,
	onSchema func(Schema), fn func(partition int, key, val []byte) error) (int64, Schema, error) {
	cat, err := listCatalog(fs, dir)
	if err != nil {
		return -1, Schema{}, err
	}
	if version < 0 {
		vs := cat.versions()
		if len(vs) == 0 {
			return -1, Schema{}, errcode.New(CodeStateNotFound, dir, "run the query first",
				"no committed state in %s", dir)
		}
		version = vs[len(vs)-1]
	}
	if _, ok := cat.latestAttempt(version); !ok {
		return -1, Schema{}, errcode.New(CodeStateNotFound, dir, "check --batch, or run the query first",
			"state version %d not found", version)
	}
	chain, err := loadChain(fs, dir, cat, version)
	if err != nil {
		return -1, Schema{}, err
	}
	head := chain[len(chain)-1]
	if onSchema != nil {
		onSchema(head.Schema)
	}
	rows := map[string]readEntry{}
	for _, m := range chain {
		if err := ctx.Err(); err != nil {
			return -1, head.Schema, err
		}
		path := fs.PathJoin(dir, m.Data)
		err := readDataFile(fs, dir, m, func(r record) error {
			if r.Kind == recDelete {
				if _, ok := rows[string(r.Key)]; !ok {
					return errcode.Corrupt(path, nil, "delta of version %d deletes missing key %x", m.Version, r.Key)
				}
				delete(rows, string(r.Key))
				return nil
			}
			rows[string(r.Key)] = readEntry{part: r.Partition, val: append([]byte(nil), r.Val...)}
			return nil
		})
		if err != nil {
			return -1, head.Schema, err
		}
	}
	counts := make([]int64, head.Partitions)
	keys := make([]string, 0, len(rows))
	for k, e := range rows {
		keys = append(keys, k)
		counts[e.part]++
	}
	for p, c := range counts {
		if c != head.PartitionRows[p] {
			return -1, head.Schema, errcode.Corrupt(fs.PathJoin(dir, metaFileName(head.Version, head.Attempt)), nil,
				"partition %d holds %d rows, the metadata says %d", p, c, head.PartitionRows[p])
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		pi, pj := rows[keys[i]].part, rows[keys[j]].part
		if pi != pj {
			return pi < pj
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		e := rows[k]
		if err := fn(e.part, []byte(k), e.val); err != nil {
			return version, head.Schema, err
		}
	}
	return version, head.Schema, nil
}

// String describes a version for logs.
func (v VersionInfo) String() string {
	return fmt.Sprintf("version %d: %d rows in %d partitions (snapshot %v)", v.Version, v.Rows, v.Partitions, v.Snapshot)
}

// EachRow passes every row of version v of the state in dir to fn in
// (partition, key) order, read from the checkpoint files alone by a
// streaming merge of the version's snapshot and deltas: memory is a read
// buffer per file, whatever the number of rows (ReadAllRaw holds every
// row). The rows of each partition are checked against the count the
// version's metadata records.
func EachRow(ctx context.Context, fs vfs.FS, dir string, v int64, fn func(partition int, key, val []byte) error) error {
	cat, err := listCatalog(fs, dir)
	if err != nil {
		return err
	}
	if _, ok := cat.latestAttempt(v); !ok {
		return errcode.New(CodeStateNotFound, dir, "check the version, or run the query first", "state version %d not found", v)
	}
	chain, err := loadChain(fs, dir, cat, v)
	if err != nil {
		return err
	}
	head := chain[len(chain)-1]
	counts := make([]int64, head.Partitions)
	err = mergeChain(ctx, fs, dir, chain, func(p int, k, val []byte) error {
		counts[p]++
		return fn(p, k, val)
	})
	if err != nil {
		return err
	}
	for p, c := range counts {
		if c != head.PartitionRows[p] {
			return errcode.Corrupt(fs.PathJoin(dir, metaFileName(head.Version, head.Attempt)), nil,
				"partition %d holds %d rows, the metadata says %d", p, c, head.PartitionRows[p])
		}
	}
	return nil
}
