package checkpoint

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
)

// Codec is what one artifact of a checkpoint adds to Log: how its keys name
// files, how keys are ordered, and the bytes of one file. Every other rule
// (listing, put-if-absent publishing, purging, temp files) is Log's, so the
// artifacts cannot drift apart. A codec holds no state; it is safe for
// concurrent use.
type Codec[K, T any] interface {
	// Name is the file name of key k.
	Name(k K) string
	// Key parses a file name; ok is false for a name that is not one of the
	// log's files. Temp files of durable never reach it.
	Key(name string) (k K, ok bool)
	// Compare orders keys as cmp.Compare does. Two files whose keys compare
	// equal are damage (Log.List refuses them).
	Compare(a, b K) int
	// Encode renders the file of key k.
	Encode(k K, v T) ([]byte, error)
	// Decode parses the file of key k read from path. Any defect is
	// CHECKPOINT_CORRUPT naming path.
	Decode(path string, k K, data []byte) (T, error)
}

// Log is a directory of files written once, one per key, in the manner of
// Spark's HDFSMetadataLog: offsets/, commits/, shape/, a file source's log
// and the live source's history are each a Log with their own Codec.
//
//   - Add publishes a file with durable's put-if-absent (temp file, fsync,
//     link; a conditional PUT on S3): of two writers racing for one key
//     exactly one wins, the other gets ErrExists.
//   - Names durable uses for temp files (durable.IsTemp) are never listed;
//     RemoveTemps deletes those a crash left (only the directory's owner,
//     the checkpoint's lock holder, may call it).
//   - Other names the codec does not parse are ignored, as Spark ignores
//     its .crc files, unless Strict is set: then they are CHECKPOINT_CORRUPT
//     naming the file.
//   - A missing directory is an empty log.
//
// A Log is a plain value; it is safe for concurrent use as far as its FS is.
type Log[K, T any] struct {
	FS    vfs.FS
	Dir   string
	Codec Codec[K, T]
	// What names a file of the log in errors ("offsets entry").
	What string
	// Strict refuses names that are neither log files nor temp files,
	// nor one of Beside: what the log's owner keeps beside it (the file
	// source's moves/ directory).
	Strict bool
	Beside []string
}

// Path returns the path of the file of key k.
func (l Log[K, T]) Path(k K) string { return l.FS.PathJoin(l.Dir, l.Codec.Name(k)) }

// Add publishes v as the file of key k; ErrExists if that file exists.
func (l Log[K, T]) Add(k K, v T) error {
	data, err := l.Codec.Encode(k, v)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", l.What, l.Path(k), err)
	}
	return Publish(l.FS, l.Dir, l.Codec.Name(k), data)
}

// AddAfter is Add whose file is published only once wait returns nil: the
// file is written and fsynced while wait runs (durable.Options.Wait), so a
// caller that must publish it after other writes overlaps its fsync with
// theirs. A failing wait publishes nothing and leaves no temp file.
func (l Log[K, T]) AddAfter(k K, v T, wait func() error) error {
	data, err := l.Codec.Encode(k, v)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", l.What, l.Path(k), err)
	}
	_, err = durable.Bytes(durable.For(l.FS), l.Dir, l.Codec.Name(k), durable.Options{Wait: wait}, data)
	return err
}

// AddOrMatch publishes v as the file of key k, once: where the file exists
// already (the same write repeated after a crash) it must hold exactly the
// bytes of v, else it is CHECKPOINT_CORRUPT.
func (l Log[K, T]) AddOrMatch(k K, v T) error {
	data, err := l.Codec.Encode(k, v)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", l.What, l.Path(k), err)
	}
	err = Publish(l.FS, l.Dir, l.Codec.Name(k), data)
	if !errors.Is(err, ErrExists) {
		return err
	}
	old, err := readFile(l.FS, l.Path(k))
	if err != nil {
		return fmt.Errorf("read %s %s: %w", l.What, l.Path(k), err)
	}
	if !bytes.Equal(old, data) {
		return errcode.Corrupt(l.Path(k), nil, "%s differs from the one being written", l.What)
	}
	return nil
}

// Get reads and decodes the file of key k. A missing file is an error
// wrapping os.ErrNotExist.
func (l Log[K, T]) Get(k K) (T, error) {
	p := l.Path(k)
	data, err := readFile(l.FS, p)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("read %s %s: %w", l.What, p, err)
	}
	return l.Codec.Decode(p, k, data)
}

// List returns the keys of the log's files in ascending order.
func (l Log[K, T]) List() ([]K, error) { return l.list(false) }

// Recover is List for the log's owner at its start: the same listing also
// deletes the temp files a crash left (RemoveTemps without a second LIST).
func (l Log[K, T]) Recover() ([]K, error) { return l.list(true) }

func (l Log[K, T]) list(removeTemps bool) ([]K, error) {
	files, err := l.files(removeTemps)
	if err != nil {
		return nil, err
	}
	keys := make([]K, len(files))
	for i, f := range files {
		keys[i] = f.key
	}
	return keys, nil
}

// Latest returns the greatest key; ok is false for an empty log.
func (l Log[K, T]) Latest() (k K, ok bool, err error) {
	keys, err := l.List()
	if err != nil || len(keys) == 0 {
		return k, false, err
	}
	return keys[len(keys)-1], true, nil
}

// Remove deletes the file of key k by name, without listing; a file that
// does not exist is not an error (removed is false).
func (l Log[K, T]) Remove(k K) (removed bool, err error) {
	p := l.Path(k)
	if err := l.FS.Remove(p); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("purge %s: %w", p, err)
	}
	return true, nil
}

// Purge deletes the files with keys below threshold, lowest first, so that
// a crash midway leaves a suffix of the log. It returns how many it deleted.
func (l Log[K, T]) Purge(below K) (int, error) {
	return l.PurgeIf(func(k K) bool { return l.Codec.Compare(k, below) < 0 })
}

// PurgeIf deletes the files whose keys drop reports, lowest first (one
// listing), and returns how many it deleted.
func (l Log[K, T]) PurgeIf(drop func(K) bool) (int, error) {
	files, err := l.files(false)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		if !drop(f.key) {
			continue
		}
		p := l.FS.PathJoin(l.Dir, f.name)
		if err := l.FS.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("purge %s: %w", p, err)
		}
		n++
	}
	return n, nil
}

// RemoveTemps deletes the temp files publishes left in the log's directory
// when they did not finish (a crash).
func (l Log[K, T]) RemoveTemps() error {
	_, err := durable.RemoveTemps(l.FS, l.Dir)
	return err
}

type logFile[K any] struct {
	key  K
	name string
}

// files lists the directory: the log's files by ascending key; with
// removeTemps the temp files it meets are deleted.
func (l Log[K, T]) files(removeTemps bool) ([]logFile[K], error) {
	names, err := l.FS.List(l.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", l.Dir, err)
	}
	files := make([]logFile[K], 0, len(names))
	for _, name := range names {
		if durable.IsTemp(name) {
			// A publish that did not finish: never visible, nothing refers to it.
			if p := l.FS.PathJoin(l.Dir, name); removeTemps {
				if err := l.FS.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					return nil, fmt.Errorf("remove stale temp file %s: %w", p, err)
				}
			}
			continue
		}
		k, ok := l.Codec.Key(name)
		if !ok {
			if l.Strict && !slices.Contains(l.Beside, name) {
				return nil, errcode.Corrupt(l.FS.PathJoin(l.Dir, name), nil, "unexpected file in the %s directory", l.What)
			}
			continue
		}
		files = append(files, logFile[K]{k, name})
	}
	slices.SortFunc(files, func(a, b logFile[K]) int { return l.Codec.Compare(a.key, b.key) })
	for i := 1; i < len(files); i++ {
		if l.Codec.Compare(files[i-1].key, files[i].key) == 0 {
			return nil, errcode.Corrupt(l.FS.PathJoin(l.Dir, files[i].name), nil,
				"%s %s and %s are the same log id", l.What, files[i-1].name, files[i].name)
		}
	}
	return files, nil
}

// BatchNames names the files of a log keyed by a batch id (or any other
// counter from 0): the id in decimal, no sign, no leading zeros. Codecs
// embed it.
type BatchNames struct{}

// Name returns the decimal id.
func (BatchNames) Name(id int64) string { return strconv.FormatInt(id, 10) }

// Key parses a batch id (ParseBatchID).
func (BatchNames) Key(name string) (int64, bool) { return ParseBatchID(name) }

// Compare orders ids numerically.
func (BatchNames) Compare(a, b int64) int { return cmp.Compare(a, b) }
