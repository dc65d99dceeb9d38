package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
)

// File and directory names inside a checkpoint.
const (
	MetadataFile = "metadata"
	OffsetsDir   = "offsets"
	CommitsDir   = "commits"
	SourcesDir   = "sources"
	StateDir     = "state"
	LockFile     = ".lock"
	// CopyMarkerFile marks an unfinished `ethstream checkpoint copy`
	// destination (package relocate); its presence refuses every read of
	// the checkpoint with CHECKPOINT_COPY_INCOMPLETE.
	CopyMarkerFile = "copy-in-progress"
)

// ErrExists is returned when a file that is written once (metadata, an
// offsets or commits entry) already exists. Callers turn it into a
// "concurrent update" error: two writers raced for the same batch id.
var ErrExists = durable.ErrExists

// Dir gives read-only access to a checkpoint directory. Reads never modify
// anything, so a Dir may be used on the checkpoint of a running query (e.g. by
// `checkpoint inspect`). A Dir is safe for concurrent use.
type Dir struct {
	FS   vfs.FS
	Path string
}

// Join returns the path of elem inside the checkpoint.
func (d Dir) Join(elem ...string) string {
	return d.FS.PathJoin(append([]string{d.Path}, elem...)...)
}

// Exists reports whether the checkpoint directory exists.
func (d Dir) Exists() bool {
	_, err := d.FS.Stat(d.Path)
	return err == nil
}

// stat reports whether the checkpoint directory exists; a path that exists
// but is not a directory is an INVALID_ARGUMENT error.
func (d Dir) stat() (bool, error) {
	return statDir(d.FS, d.Path)
}

func statDir(fs vfs.FS, path string) (bool, error) {
	st, err := fs.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("stat checkpoint dir %s: %w", path, err)
	}
	if !st.IsDir() {
		return true, errcode.New(errcode.InvalidArgument, path,
			"pass the checkpoint directory of the query", "checkpoint path is not a directory")
	}
	return true, nil
}

// ReadExisting reads the snapshot of a checkpoint that must already exist,
// for commands that only read one (inspect): a missing path, a regular file
// and a directory that holds no checkpoint (an empty directory, a Delta
// table) are INVALID_ARGUMENT errors. It writes nothing and creates nothing.
func (d Dir) ReadExisting() (*Snapshot, error) {
	ok, err := d.stat()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errcode.New(errcode.InvalidArgument, d.Path, "check the path", "checkpoint directory does not exist")
	}
	s, err := d.ReadSnapshot()
	if err != nil {
		return nil, err
	}
	if !s.HasMetadata && s.LatestID < 0 && s.CommittedID < 0 {
		return nil, errcode.New(errcode.InvalidArgument, d.Path,
			"pass the checkpoint directory of a query (the one given to run --checkpoint)",
			"not a checkpoint: the directory has no %s file and no %s/ entries", MetadataFile, OffsetsDir)
	}
	return s, nil
}

// ReadMetadata returns the query metadata; ok is false if the file does not
// exist yet (a new checkpoint).
func (d Dir) ReadMetadata() (m Metadata, ok bool, err error) {
	path := d.Join(MetadataFile)
	data, err := readFile(d.FS, path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Metadata{}, false, nil
		}
		return Metadata{}, false, fmt.Errorf("read query metadata %s: %w", path, err)
	}
	m, err = ParseMetadata(path, data)
	return m, err == nil, err
}

// offsets is the write-ahead log offsets/ (format: doc.go).
func (d Dir) offsets() Log[int64, *OffsetEntry] {
	return Log[int64, *OffsetEntry]{FS: d.FS, Dir: d.Join(OffsetsDir), Codec: OffsetsCodec{}, What: "offsets entry"}
}

// commits is the batch completion log commits/ (format: doc.go).
func (d Dir) commits() Log[int64, *CommitEntry] {
	return Log[int64, *CommitEntry]{FS: d.FS, Dir: d.Join(CommitsDir), Codec: CommitsCodec{}, What: "commit entry"}
}

// ListOffsets returns the batch ids of offsets/ in ascending order; names
// that are not batch ids are ignored.
func (d Dir) ListOffsets() ([]int64, error) { return d.offsets().List() }

// ListCommits returns the batch ids of commits/ in ascending order.
func (d Dir) ListCommits() ([]int64, error) { return d.commits().List() }

// ParseBatchID parses a file name that is a batch id: a non-negative decimal
// integer without sign or leading zeros.
func ParseBatchID(name string) (int64, bool) {
	if name == "" || (len(name) > 1 && name[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(name, 10, 64)
	return id, err == nil
}

// OffsetsPath returns the path of offsets/<id>.
func (d Dir) OffsetsPath(id int64) string { return d.offsets().Path(id) }

// CommitPath returns the path of commits/<id>.
func (d Dir) CommitPath(id int64) string { return d.commits().Path(id) }

// ReadOffsets reads and validates offsets/<id>.
func (d Dir) ReadOffsets(id int64) (*OffsetEntry, error) { return d.offsets().Get(id) }

// ReadCommit reads and validates commits/<id>.
func (d Dir) ReadCommit(id int64) (*CommitEntry, error) { return d.commits().Get(id) }

// Snapshot is what a restart needs from the checkpoint, read in one pass.
type Snapshot struct {
	Path     string
	Metadata Metadata
	// HasMetadata is false for a new checkpoint.
	HasMetadata bool
	// LatestID is the latest offsets id L, -1 if none; Latest its entry.
	LatestID int64
	Latest   *OffsetEntry
	// Prev is offsets/L-1 (nil if L is 0 or the entry is missing).
	Prev *OffsetEntry
	// CommittedID is the latest commit id C, -1 if none; Committed its entry.
	CommittedID int64
	Committed   *CommitEntry
	// CommittedOffsets is offsets/C (nil if none).
	CommittedOffsets *OffsetEntry
}

// ReadSnapshot reads the metadata and the latest offsets and commit entries.
// It writes nothing.
func (d Dir) ReadSnapshot() (*Snapshot, error) {
	s := &Snapshot{Path: d.Path, LatestID: -1, CommittedID: -1}
	if _, err := d.stat(); err != nil {
		return nil, err
	}
	if err := d.CheckCopyComplete(); err != nil {
		return nil, err
	}
	var err error
	if s.Metadata, s.HasMetadata, err = d.ReadMetadata(); err != nil {
		return nil, err
	}
	// Commits are listed before offsets: a running query writes offsets/N
	// before commits/N, so every commit seen here has its offsets entry
	// listed too, even while the query writes.
	commits, err := d.ListCommits()
	if err != nil {
		return nil, err
	}
	offs, err := d.ListOffsets()
	if err != nil {
		return nil, err
	}
	if len(offs) > 0 && !s.HasMetadata {
		return nil, errcode.Corrupt(d.Join(MetadataFile), nil, "offsets exist but the query metadata file is missing")
	}
	if len(offs) > 0 {
		s.LatestID = offs[len(offs)-1]
		if s.Latest, err = d.ReadOffsets(s.LatestID); err != nil {
			return nil, err
		}
		if s.LatestID > 0 && len(offs) > 1 && offs[len(offs)-2] == s.LatestID-1 {
			if s.Prev, err = d.ReadOffsets(s.LatestID - 1); err != nil {
				return nil, err
			}
		}
	}
	if len(commits) > 0 {
		s.CommittedID = commits[len(commits)-1]
		if s.Committed, err = d.ReadCommit(s.CommittedID); err != nil {
			return nil, err
		}
		if s.CommittedID > s.LatestID {
			return nil, errcode.Corrupt(d.CommitPath(s.CommittedID), nil,
				"commit %d has no offsets entry (latest offsets entry is %d)", s.CommittedID, s.LatestID)
		}
		switch s.CommittedID {
		case s.LatestID:
			s.CommittedOffsets = s.Latest
		case s.LatestID - 1:
			s.CommittedOffsets = s.Prev
		default:
			if s.CommittedOffsets, err = d.ReadOffsets(s.CommittedID); err != nil {
				return nil, err
			}
		}
		if s.CommittedOffsets == nil {
			return nil, errcode.Corrupt(d.OffsetsPath(s.CommittedID), nil, "offsets entry of committed batch %d is missing", s.CommittedID)
		}
	}
	return s, nil
}

// CheckCopyComplete refuses a checkpoint that holds the marker of an
// unfinished `checkpoint copy` (CopyMarkerFile) with
// CHECKPOINT_COPY_INCOMPLETE. ReadSnapshot runs it first; a command that
// reads a checkpoint without a snapshot (state dump) runs it itself.
func (d Dir) CheckCopyComplete() error {
	if _, err := d.FS.Stat(d.Join(CopyMarkerFile)); err == nil {
		return errcode.New(errcode.CheckpointCopyIncomplete, d.Join(CopyMarkerFile),
			"run the same `ethstream checkpoint copy` again (it clears this destination and copies afresh; the source is untouched), or resume from the source",
			"the checkpoint is an unfinished copy: a `checkpoint copy` stopped before it completed")
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("stat %s: %w", d.Join(CopyMarkerFile), err)
	}
	return nil
}

// Writer is a locked checkpoint open for writing. It is not safe for
// concurrent use; one query owns it.
type Writer struct {
	Dir
	lock io.Closer
	// purgedBelow: every offsets and commits entry below it is deleted
	// (0 = not known yet: the next Purge lists the logs).
	purgedBelow int64
	progress    progressLog // progress.go
}

// Lock takes the checkpoint's exclusive lock, creating the directory and the
// .lock file if needed. It writes nothing else; callers validate a start from
// a read of the checkpoint (ReadSnapshot) before they call it, so that a
// refused start creates nothing. A path that is a regular file is
// INVALID_ARGUMENT; another live holder gives CHECKPOINT_LOCKED.
func Lock(fs vfs.FS, path string) (*Writer, error) {
	exists, err := statDir(fs, path)
	if err != nil {
		return nil, err
	}
	if !exists {
		if err := fs.MkdirAll(path, 0o755); err != nil {
			return nil, fmt.Errorf("create checkpoint dir %s: %w", path, err)
		}
		// Make the new directory's entry durable in its parent.
		if err := syncDir(fs, fs.PathDir(path)); err != nil {
			return nil, err
		}
	}
	lockPath := fs.PathJoin(path, LockFile)
	l, err := fs.Lock(lockPath)
	if err != nil {
		if errcode.Code(err) != "" {
			return nil, err // a store's own verdict (an S3 lease names its holder)
		}
		if e := errcode.Resource(err); e != nil {
			return nil, e // a read-only disk, say: no other query is involved
		}
		return nil, errcode.Wrap(err, errcode.CheckpointLocked, path,
			"stop the other query using this checkpoint, or use another checkpoint directory",
			"another running query holds the checkpoint lock")
	}
	return &Writer{Dir: Dir{FS: fs, Path: path}, lock: l}, nil
}

// Prepare creates the checkpoint's subdirectories and deletes stale temp
// files left by a crash. Call it only once the start has been validated.
func (w *Writer) Prepare() error {
	for _, sub := range []string{OffsetsDir, CommitsDir, SourcesDir} {
		if err := w.FS.MkdirAll(w.Join(sub), 0o755); err != nil {
			return fmt.Errorf("create checkpoint dir %s: %w", w.Join(sub), err)
		}
	}
	if err := syncDir(w.FS, w.Path); err != nil {
		return err
	}
	if _, err := durable.RemoveTemps(w.FS, w.Path); err != nil {
		return err
	}
	if err := w.offsets().RemoveTemps(); err != nil {
		return err
	}
	return w.commits().RemoveTemps()
}

// WriteMetadata publishes the metadata file; ErrExists if it exists.
func (w *Writer) WriteMetadata(m Metadata) error {
	data, err := EncodeMetadata(m)
	if err != nil {
		return err
	}
	return Publish(w.FS, w.Path, MetadataFile, data)
}

// WriteOffsets publishes offsets/<id>; ErrExists if it exists.
func (w *Writer) WriteOffsets(id int64, e *OffsetEntry) error { return w.offsets().Add(id, e) }

// WriteCommit publishes commits/<id>; ErrExists if it exists.
func (w *Writer) WriteCommit(id int64, c *CommitEntry) error { return w.commits().Add(id, c) }

// WriteCommitAfter publishes commits/<id> once wait returns nil, writing and
// fsyncing it while wait runs (Log.AddAfter): the engine writes a batch's
// commit alongside its sink write and state commit, and wait is what
// publishes it only after both are durable. ErrExists if it exists.
func (w *Writer) WriteCommitAfter(id int64, c *CommitEntry, wait func() error) error {
	return w.commits().AddAfter(id, c, wait)
}

// SourceDir returns sources/<key>, creating it durably (a crash never loses
// the directory of a source that wrote into it).
func (w *Writer) SourceDir(key string) (string, error) {
	return w.durableDir(SourcesDir, key)
}

// StateDir returns state/<opID>, creating it durably.
func (w *Writer) StateDir(opID string) (string, error) {
	return w.durableDir(StateDir, opID)
}

func (w *Writer) durableDir(parent, name string) (string, error) {
	p := w.Join(parent, name)
	if _, err := w.FS.Stat(p); err == nil {
		return p, nil
	}
	if err := w.FS.MkdirAll(p, 0o755); err != nil {
		return "", fmt.Errorf("create checkpoint dir %s: %w", p, err)
	}
	if err := syncDir(w.FS, w.Join(parent)); err != nil {
		return "", err
	}
	if err := syncDir(w.FS, w.Path); err != nil {
		return "", err
	}
	return p, nil
}

// maxPurgeWithoutList bounds the ids Purge deletes by name, without listing.
const maxPurgeWithoutList = 1000

// Purge deletes offsets and commits entries with id < current-minRetain.
// The first Purge of a Writer lists both logs; later ones delete the ids
// that fell out of the retention since, by name (no LIST per batch on S3).
// Offsets are deleted before commits, oldest first, so a crash midway
// leaves a consistent (if longer) log.
func (w *Writer) Purge(current int64, minRetain int) (int, error) {
	if minRetain <= 0 || current < int64(minRetain) {
		return 0, nil
	}
	threshold := current - int64(minRetain)
	if threshold <= w.purgedBelow {
		return 0, nil
	}
	byName := w.purgedBelow > 0 && threshold-w.purgedBelow <= maxPurgeWithoutList
	n, err := purgeLog(w.offsets(), w.purgedBelow, threshold, byName)
	if err != nil {
		return n, err
	}
	m, err := purgeLog(w.commits(), w.purgedBelow, threshold, byName)
	if n += m; err != nil {
		return n, err
	}
	w.purgedBelow = threshold
	return n, nil
}

// purgeLog deletes l's ids below threshold: by name from purgedBelow when
// byName (this writer purged below purgedBelow already), else by listing.
func purgeLog[T any](l Log[int64, T], purgedBelow, threshold int64, byName bool) (int, error) {
	if !byName {
		return l.Purge(threshold)
	}
	n := 0
	for id := purgedBelow; id < threshold; id++ {
		removed, err := l.Remove(id)
		if err != nil {
			return n, err
		}
		if removed {
			n++
		}
	}
	return n, nil
}

// AppendLine appends line plus "\n" to the file at path, creating it, and syncs.
func AppendLine(fs vfs.FS, path string, line []byte) error {
	return appendLine(fs, path, line, true)
}

// AppendLineNoSync appends line plus "\n" without fsync (informational logs).
func AppendLineNoSync(fs vfs.FS, path string, line []byte) error {
	return appendLine(fs, path, line, false)
}

func appendLine(fs vfs.FS, path string, line []byte, sync bool) (err error) {
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	buf := make([]byte, 0, len(line)+1)
	buf = append(append(buf, line...), '\n')
	if _, err := f.WriteAt(buf, st.Size()); err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", path, err)
		}
	}
	return nil
}

// Close releases the lock.
func (w *Writer) Close() error {
	if w.lock == nil {
		return nil
	}
	err := w.lock.Close()
	w.lock = nil
	return err
}

// Publish writes data to dir/name crash-safely without ever overwriting
// (durable.NoOverwrite: temp file, fsync, link(2), fsync dir; ErrExists if
// the name is taken). Every immutable file of a checkpoint, including a
// source's private logs under sources/<key>/, is published this way.
func Publish(fs vfs.FS, dir, name string, data []byte) error {
	_, err := durable.Bytes(durable.For(fs), dir, name, durable.Options{}, data)
	return err
}

func syncDir(fs vfs.FS, dir string) error { return durable.SyncDir(fs, dir) }

// maxFileSize bounds what a reader loads; checkpoint files are small.
const maxFileSize = 64 << 20

func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, errcode.Corrupt(path, nil, "file larger than %d bytes", maxFileSize)
	}
	return data, nil
}

// ReadFile reads a whole file through fs (for tools such as progress readers).
func ReadFile(fs vfs.FS, path string) ([]byte, error) { return readFile(fs, path) }
