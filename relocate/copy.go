package relocate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/storage"
)

// Codes of `checkpoint copy`.
const (
	// CodeDestinationNotEmpty: a destination holds files that are not an
	// unfinished copy's; the copy never writes over them.
	CodeDestinationNotEmpty = "COPY_DESTINATION_NOT_EMPTY"
	// CodeVerifyFailed: a file read back from the destination differs from
	// the source (size or SHA-256).
	CodeVerifyFailed = "COPY_VERIFY_FAILED"
)

// markerVersion is the version of the copy-in-progress marker (doc.go).
const markerVersion = 1

// marker is the content of <DST>/copy-in-progress (doc.go).
type marker struct {
	Version int    `json:"version"`
	From    string `json:"from"`
	Table   string `json:"table"`
	TableTo string `json:"tableTo"`
}

// Options name what to copy. FS holds every location (storage.NewFS over
// all four); paths are FS paths (a local absolute path or s3://bucket/key).
type Options struct {
	FS       vfs.FS
	From, To string
	// TableFrom and TableTo are the table's source and destination; both
	// "" to copy the checkpoint alone.
	TableFrom, TableTo string
	Logger             *slog.Logger
	// afterStep, if set (tests), is called after each file the copy
	// publishes at a destination (the marker included) and each file its
	// clear removes, with its path; an error aborts the copy there as a
	// crash would.
	afterStep func(path string) error
}

// Result is what a copy did.
type Result struct {
	CheckpointFiles, TableFiles int
	Bytes                       int64
	// Cleared is set when the destination held an unfinished copy, removed
	// first.
	Cleared bool
}

// file is one file to copy: its source path and its path relative to the
// root it is copied from.
type file struct {
	src, rel string
	size     int64
}

// Copy copies the stopped query's checkpoint (and table) as doc.go
// describes. It returns with the destination complete, or an error that
// leaves it absent or marked incomplete. Everything is checked before the
// first write: the source, then the destinations, then, under the
// source's lock, the files to copy.
func Copy(ctx context.Context, o Options) (res Result, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := o.validate(); err != nil {
		return res, err
	}
	if err := o.checkSource(); err != nil {
		return res, err
	}
	cleared, err := o.checkDestinations()
	if err != nil {
		return res, err
	}
	// The source's lock, as a query takes it: refuses while one runs, and
	// keeps one from starting while the copy reads.
	w, err := checkpoint.Lock(o.FS, o.From)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, w.Close()) }()
	ckFiles, tblFiles, err := o.files()
	if err != nil {
		return res, err
	}
	if cleared {
		if err := o.clearUnfinished(); err != nil {
			return res, err
		}
		res.Cleared = true
	}
	return o.copyAll(res, ckFiles, tblFiles)
}

// checkSource refuses a source that is not a whole checkpoint of a query
// that ran (a damaged one, or an unfinished copy used as one), or a table
// source without a Delta log, before anything is written.
func (o Options) checkSource() error {
	src := checkpoint.Dir{FS: o.FS, Path: o.From}
	if !src.Exists() {
		return errcode.New(errcode.CheckpointNotFound, o.From, "check the source path", "the source checkpoint does not exist")
	}
	if _, err := src.ReadSnapshot(); err != nil {
		return err
	}
	if _, ok, err := src.ReadMetadata(); err != nil || !ok {
		if err == nil {
			err = errcode.New(errcode.InvalidArgument, o.From, "pass the checkpoint directory of a query that ran", "the source holds no checkpoint metadata")
		}
		return err
	}
	if o.TableFrom != "" {
		if _, err := o.FS.Stat(o.FS.PathJoin(o.TableFrom, "_delta_log")); err != nil {
			return errcode.Wrap(err, errcode.InvalidArgument, o.TableFrom, "pass --table SRC DST with SRC the query's Delta table", "the table source holds no _delta_log")
		}
	}
	return nil
}

// files lists what to copy: the checkpoint's files and the table's, the
// table's in the order sortTable gives.
func (o Options) files() (ckFiles, tblFiles []file, err error) {
	if ckFiles, err = o.walk(o.From, checkpointFile); err != nil {
		return nil, nil, err
	}
	if o.TableFrom != "" {
		if tblFiles, err = o.walk(o.TableFrom, tableFile); err != nil {
			return nil, nil, err
		}
		sortTable(tblFiles)
	}
	return ckFiles, tblFiles, nil
}

// clearUnfinished removes an unfinished earlier copy at the destinations,
// in the order that keeps the checkpoint destination refused until it is
// empty (doc.go, Clearing): the table destination (in the reverse of the
// copy's order: at every step a shorter prefix of its log, or a log that
// readers refuse), then every file of the checkpoint destination but the
// marker, each directory synced after its removals, and the marker last.
// A crash at any point leaves the marker over whatever is left
// (CHECKPOINT_COPY_INCOMPLETE, and the copy again clears the rest), or an
// empty destination.
func (o Options) clearUnfinished() error {
	o.Logger.Info("clearing an unfinished copy", "checkpoint", o.To, "table", o.TableTo)
	if o.TableTo != "" {
		if err := o.removeTree(o.TableTo, nil, clearRank); err != nil {
			return fmt.Errorf("clear the unfinished copy at %s: %w", o.TableTo, err)
		}
	}
	spare := func(rel string) bool { return rel == checkpoint.CopyMarkerFile }
	if err := o.removeTree(o.To, spare, func(string) int { return 0 }); err != nil {
		return fmt.Errorf("clear the unfinished copy at %s: %w", o.To, err)
	}
	mk := o.FS.PathJoin(o.To, checkpoint.CopyMarkerFile)
	if err := o.FS.Remove(mk); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear the unfinished copy: remove the marker %s: %w", mk, err)
	}
	if err := durable.SyncDir(o.FS, o.To); err != nil {
		return err
	}
	return o.step(mk)
}

// clearRank orders a table's removal, the reverse of sortTable's copy:
// _last_checkpoint, then the log newest version first, then the data
// files.
func clearRank(rel string) int { return 2 - tableRank(rel) }

// removeTree removes every file under root (temp files too) but those
// spare keeps (nil: none), by rank, then name descending (for a log:
// newest first); the directories of one rank's removals are synced before
// the next rank's begin, so a crash never keeps a later rank's removal and
// loses an earlier one's. Then it removes the directories left empty,
// deepest first, root excepted.
func (o Options) removeTree(root string, spare func(rel string) bool, rank func(rel string) int) error {
	files, dirs, err := o.walkAll(root)
	if err != nil {
		return err
	}
	files = slices.DeleteFunc(files, func(f file) bool { return spare != nil && spare(f.rel) })
	slices.SortStableFunc(files, func(a, b file) int {
		if ra, rb := rank(a.rel), rank(b.rel); ra != rb {
			return ra - rb
		}
		return strings.Compare(b.rel, a.rel)
	})
	touched := map[string]bool{}
	syncTouched := func() error {
		for _, d := range slices.Sorted(maps.Keys(touched)) {
			if err := durable.SyncDir(o.FS, d); err != nil {
				return err
			}
		}
		clear(touched)
		return nil
	}
	for i, f := range files {
		if i > 0 && rank(f.rel) != rank(files[i-1].rel) {
			if err := syncTouched(); err != nil {
				return err
			}
		}
		if err := o.FS.Remove(f.src); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", f.src, err)
		}
		touched[o.FS.PathDir(f.src)] = true
		if err := o.step(f.src); err != nil {
			return err
		}
	}
	if err := syncTouched(); err != nil {
		return err
	}
	slices.Reverse(dirs) // children after their parents in walk order
	for _, d := range dirs {
		if names, err := o.FS.List(d); err != nil || len(names) > 0 {
			continue // not empty (spared files), or gone
		}
		if err := o.FS.RemoveAll(d); err != nil {
			return fmt.Errorf("remove %s: %w", d, err)
		}
		if err := durable.SyncDir(o.FS, o.FS.PathDir(d)); err != nil {
			return err
		}
	}
	return nil
}

// walkAll lists every file under root, temp files included, and every
// directory below root (parents before their children). A missing root
// has none.
func (o Options) walkAll(root string) (files []file, dirs []string, err error) {
	var visit func(dir, rel string) error
	visit = func(dir, rel string) error {
		infos, err := storage.ListInfo(o.FS, dir, nil)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
		for _, info := range infos {
			p, r := o.FS.PathJoin(dir, info.Name()), path.Join(rel, info.Name())
			if info.IsDir() {
				dirs = append(dirs, p)
				if err := visit(p, r); err != nil {
					return err
				}
				continue
			}
			files = append(files, file{src: p, rel: r, size: info.Size()})
		}
		return nil
	}
	return files, dirs, visit(root, "")
}

// copyAll writes the copy: the copy-in-progress marker first (every reader
// refuses the destination while it exists), the table, the checkpoint,
// then the marker's removal, synced.
func (o Options) copyAll(res Result, ckFiles, tblFiles []file) (Result, error) {
	m, _ := json.Marshal(marker{Version: markerVersion, From: o.From, Table: o.TableFrom, TableTo: o.TableTo})
	if err := o.publish(o.To, checkpoint.CopyMarkerFile, append(m, '\n')); err != nil {
		return res, err
	}
	for _, f := range tblFiles {
		n, err := o.copyFile(f, o.TableTo)
		if err != nil {
			return res, err
		}
		res.TableFiles++
		res.Bytes += n
	}
	for _, f := range ckFiles {
		n, err := o.copyFile(f, o.To)
		if err != nil {
			return res, err
		}
		res.CheckpointFiles++
		res.Bytes += n
	}
	markerPath := o.FS.PathJoin(o.To, checkpoint.CopyMarkerFile)
	if err := o.FS.Remove(markerPath); err != nil {
		return res, fmt.Errorf("remove the copy marker %s: %w", markerPath, err)
	}
	return res, durable.SyncDir(o.FS, o.To)
}

// validate refuses locations that overlap: a destination inside a source
// (the walk would copy the copy) or a source inside a destination.
func (o Options) validate() error {
	if o.FS == nil || o.From == "" || o.To == "" {
		return errcode.New(errcode.MissingFlag, "", "pass SRC and DST", "checkpoint copy needs a source and a destination")
	}
	if (o.TableFrom == "") != (o.TableTo == "") {
		return errcode.New(errcode.InvalidArgument, "", "pass --table SRC DST", "the table needs a source and a destination")
	}
	roots := []string{o.From, o.To}
	if o.TableFrom != "" {
		roots = append(roots, o.TableFrom, o.TableTo)
	}
	for i, a := range roots {
		for j, b := range roots {
			if i != j && within(a, b) {
				return errcode.New(errcode.InvalidArgument, a, "use locations that do not contain one another",
					"%s and %s overlap: a copy must not read what it writes", a, b)
			}
		}
	}
	return nil
}

// within reports whether path a is b or under it.
func within(a, b string) bool {
	a, b = strings.TrimSuffix(a, "/"), strings.TrimSuffix(b, "/")
	return a == b || strings.HasPrefix(a, b+"/")
}

// checkDestinations refuses a destination that holds files, unless the
// checkpoint destination holds the marker of an unfinished copy (cleared
// true: both destinations are removed first).
func (o Options) checkDestinations() (cleared bool, err error) {
	mk := o.FS.PathJoin(o.To, checkpoint.CopyMarkerFile)
	data, err := checkpoint.ReadFile(o.FS, mk)
	switch {
	case err == nil:
		var m marker
		if jerr := json.Unmarshal(bytes.TrimSpace(data), &m); jerr != nil || m.Version != markerVersion {
			return false, errcode.Corrupt(mk, jerr, "copy marker of an unknown version or format")
		}
		return true, nil
	case !errors.Is(err, os.ErrNotExist):
		return false, err
	}
	for _, d := range []string{o.To, o.TableTo} {
		if d == "" {
			continue
		}
		files, err := o.walk(d, func(string) bool { return true })
		if err != nil {
			return false, err
		}
		if len(files) > 0 {
			return false, errcode.New(CodeDestinationNotEmpty, d, "copy to a new location, or remove what is there first",
				"the destination holds %d files (%s first): a copy never writes over them", len(files), files[0].rel)
		}
	}
	return false, nil
}

// checkpointFile keeps what a checkpoint copy carries: not the lock (a
// file, or the lease objects under .lock/), not the marker.
func checkpointFile(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return first != checkpoint.LockFile && rel != checkpoint.CopyMarkerFile
}

// tableFile keeps every file of a table.
func tableFile(string) bool { return true }

// sortTable orders a table's files for a crash-consistent copy (doc.go):
// data files, then _delta_log in name order, _last_checkpoint last.
func sortTable(fs []file) {
	slices.SortStableFunc(fs, func(a, b file) int {
		if ra, rb := tableRank(a.rel), tableRank(b.rel); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.rel, b.rel)
	})
}

// tableRank is a table file's phase in a copy: data files 0, the log 1,
// _last_checkpoint 2.
func tableRank(rel string) int {
	switch {
	case rel == "_delta_log/_last_checkpoint":
		return 2
	case strings.HasPrefix(rel, "_delta_log/"):
		return 1
	}
	return 0
}

// walk lists every file under root (relative paths with "/", sorted),
// skipping temp files of unfinished publishes and what keep refuses. A
// missing root has none.
func (o Options) walk(root string, keep func(rel string) bool) ([]file, error) {
	var out []file
	var visit func(dir, rel string) error
	visit = func(dir, rel string) error {
		infos, err := storage.ListInfo(o.FS, dir, nil)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
		for _, info := range infos {
			name := info.Name()
			r := path.Join(rel, name)
			if durable.IsTemp(name) || !keep(r) {
				continue
			}
			p := o.FS.PathJoin(dir, name)
			if info.IsDir() {
				if err := visit(p, r); err != nil {
					return err
				}
				continue
			}
			out = append(out, file{src: p, rel: r, size: info.Size()})
		}
		return nil
	}
	if err := visit(root, ""); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b file) int { return strings.Compare(a.rel, b.rel) })
	return out, nil
}

// copyFile publishes f under root and reads it back: the size and SHA-256
// must be those read from the source.
func (o Options) copyFile(f file, root string) (int64, error) {
	in, err := o.FS.Open(f.src)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", f.src, err)
	}
	defer in.Close()
	dst := o.FS.PathJoin(root, f.rel)
	dir := o.FS.PathDir(dst)
	if err := durable.EnsureDir(o.FS, dir); err != nil {
		return 0, err
	}
	h := sha256.New()
	var n int64
	_, err = durable.For(o.FS).Publish(dir, o.FS.PathBase(dst), durable.Options{}, func(w io.Writer) error {
		var err error
		n, err = io.Copy(io.MultiWriter(w, h), in)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("copy %s to %s: %w", f.src, dst, err)
	}
	if err := o.step(dst); err != nil {
		return 0, err
	}
	want := h.Sum(nil)
	got, size, err := digest(o.FS, dst)
	if err != nil {
		return 0, fmt.Errorf("read back %s: %w", dst, err)
	}
	if size != n || !bytes.Equal(got, want) {
		return 0, errcode.New(CodeVerifyFailed, dst, "check the destination storage, remove the destination and copy again",
			"%s reads back %d bytes (sha256 %x), but %d bytes (sha256 %x) were copied from %s", dst, size, got[:8], n, want[:8], f.src)
	}
	return n, nil
}

// publish writes data as dir/name, put-if-absent.
func (o Options) publish(dir, name string, data []byte) error {
	if err := durable.EnsureDir(o.FS, dir); err != nil {
		return err
	}
	if _, err := durable.Bytes(durable.For(o.FS), dir, name, durable.Options{}, data); err != nil {
		return fmt.Errorf("write %s: %w", o.FS.PathJoin(dir, name), err)
	}
	return o.step(o.FS.PathJoin(dir, name))
}

// step is called after each file published or removed (afterStep).
func (o Options) step(p string) error {
	if o.afterStep != nil {
		return o.afterStep(p)
	}
	return nil
}

// digest is the SHA-256 and size of the file at p.
func digest(fs vfs.FS, p string) ([]byte, int64, error) {
	f, err := fs.Open(p)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return h.Sum(nil), n, err
}
