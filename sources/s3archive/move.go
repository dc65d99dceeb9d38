package s3archive

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// # Move records (version 1)
//
// An archive that moved (a mirror of the bucket, another prefix, a local
// directory copied to S3) keeps its source log: the logged paths stay those
// of the old location, and a move record maps them to the new one. The
// records live in <checkpoint>/sources/<key>/moves/ (beside the source log,
// in a directory of their own: the log's strict scan admits that one name,
// checkpoint.Log.Beside), one file per move n = 0, 1, 2, ..., written once
// through the checkpoint's log (internal/durable's put-if-absent), never
// rewritten or pruned, and read from 0 up to the first missing number:
//
//	v1
//	{"from":"file:///old/v1.0/eth/blocks","to":"s3://mirror/v1.0/eth/blocks"}
//
// from and to are locations as the query shape records them (URI without
// query, no final "/"); neither lies under the other. Every Open applies
// the records in order to every logged path (the seen set and the files of
// a pending batch): a path under from+"/" is rewritten to the same rest
// under to, so after A -> B -> C an entry logged at A is read at C. An
// unknown version, a field missing or unknown, or a malformed location is
// CHECKPOINT_CORRUPT naming the file. A log without moves/ has no moves.
const (
	movesDir       = "moves"
	moveRecordV1   = 1
	moveRecordWhat = "source move record"
)

// move is one move record.
type move struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// apply rewrites a logged path under m.From to the same rest under m.To.
func (m move) apply(p string) string {
	if rest, ok := strings.CutPrefix(p, m.From+"/"); ok {
		return m.To + "/" + rest
	}
	return p
}

// moveCodec is the codec of the move records: <n>, version 1.
type moveCodec struct{ checkpoint.BatchNames }

func (moveCodec) Compare(a, b int64) int { return cmp.Compare(a, b) }

func (moveCodec) Encode(_ int64, m move) ([]byte, error) {
	j, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte("v"+strconv.Itoa(moveRecordV1)+"\n"), j...), nil
}

func (moveCodec) Decode(path string, _ int64, data []byte) (move, error) {
	var m move
	head, body, _ := bytes.Cut(data, []byte("\n"))
	if string(head) != "v"+strconv.Itoa(moveRecordV1) {
		return m, errcode.Corrupt(path, nil, "source move record has version %q; this build reads v%d", head, moveRecordV1)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || dec.More() {
		return m, errcode.Corrupt(path, err, "source move record is not one JSON object {from, to}")
	}
	if err := checkMovePair(m.From, m.To); err != nil {
		return m, errcode.Corrupt(path, err, "source move record")
	}
	return m, nil
}

// checkMovePair refuses locations that are malformed, or of which one lies
// under the other (a rewrite would then apply to paths already moved).
func checkMovePair(from, to string) error {
	for _, l := range []string{from, to} {
		if n, err := normalLocation(l); err != nil || n != l {
			return fmt.Errorf("location %q is not a normalised s3:// or file:// location", l)
		}
	}
	if from == to || strings.HasPrefix(to, from+"/") || strings.HasPrefix(from, to+"/") {
		return fmt.Errorf("%s and %s: one location lies under the other", from, to)
	}
	return nil
}

// moveLog is the move records of the source log in dir.
func moveLog(fs vfs.FS, dir string) checkpoint.Log[int64, move] {
	return checkpoint.Log[int64, move]{FS: fs, Dir: fs.PathJoin(dir, movesDir), Codec: moveCodec{}, What: moveRecordWhat, Strict: true}
}

// readMoves reads the move records 0, 1, ... up to the first missing one.
// It reads by name rather than listing: a start without moves costs one
// missing read (on S3 a GET, not a LIST of the checkpoint's prefix).
func readMoves(fs vfs.FS, dir string) ([]move, error) {
	l := moveLog(fs, dir)
	var out []move
	for id := int64(0); ; id++ {
		m, err := l.Get(id)
		if errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
}

// applyMoves rewrites a logged path through every move, in order.
func applyMoves(ms []move, p string) string {
	for _, m := range ms {
		p = m.apply(p)
	}
	return p
}

var _ stream.MoveChecker = (*Source)(nil)

// CheckMove admits a move of the archive from old to this source's
// location (stream.MoveChecker) when the URI says movedFrom=old, reading
// only: the source log and move records in env.MetadataDir and one listing
// of the new location. Every logged file, mapped through the recorded moves
// and then from old to here, must be listed here, with the logged size when
// the log has one (logs written before sizes: existence only). Otherwise it
// is SOURCE_LOCATION_CHANGED naming the first file missing or different.
// Not told (no movedFrom): false, nil, and the restart rule refuses.
func (s *Source) CheckMove(ctx context.Context, env stream.SourceEnv, old string) (bool, error) {
	s.moveAdmitted = move{}
	if s.opts.MovedFrom == "" {
		return false, nil
	}
	to, err := normalLocation(s.opts.URI)
	if err != nil {
		return false, err
	}
	refuse := func(format string, args ...any) error {
		return errcode.New(errcode.SourceLocationChanged, env.MetadataDir,
			"move every file the source read to "+to+" (same relative path and size), or point the source back at "+old,
			"%s was read at %s and is now read at %s (movedFrom=%s), but "+format,
			append([]any{s.Description(), old, to, s.opts.MovedFrom}, args...)...)
	}
	if strings.TrimSuffix(old, "/") != s.opts.MovedFrom {
		return false, errcode.New(errcode.SourceLocationChanged, env.MetadataDir, "pass movedFrom="+old+", the location the checkpoint recorded",
			"%s says movedFrom=%s, but the checkpoint recorded the source at %s", s.Description(), s.opts.MovedFrom, old)
	}
	m := move{From: s.opts.MovedFrom, To: to}
	if err := checkMovePair(m.From, m.To); err != nil {
		return false, refuse("%v", err)
	}
	entries, moves, err := readLogAndMoves(env.FS, env.MetadataDir)
	if err != nil {
		return false, err
	}
	objs, err := s.st.list(ctx)
	if err != nil {
		return false, err
	}
	here := make(map[string]int64, len(objs))
	for _, o := range objs {
		here[o.URI] = o.Size
	}
	for _, e := range entries {
		// A path already under the new location was moved by a start that
		// crashed after its move record, before its shape record.
		p := applyMoves(moves, e.Path)
		if !strings.HasPrefix(p, m.To+"/") {
			if !strings.HasPrefix(p, m.From+"/") {
				return false, refuse("the logged file %s is not under %s", e.Path, m.From)
			}
			p = m.apply(p)
		}
		size, ok := here[p]
		switch {
		case !ok:
			return false, refuse("the logged file %s is not at %s", e.Path, p)
		case e.Size > 0 && size != e.Size:
			return false, refuse("%s has %d bytes where the logged file %s had %d", p, size, e.Path, e.Size)
		}
	}
	s.moveAdmitted, s.probed = m, objs
	return true, nil
}

// readLogAndMoves reads, without writing, the source log's entries (every
// admitted file) and the move records in dir.
func readLogAndMoves(fs vfs.FS, dir string) ([]logEntry, []move, error) {
	lg, err := checkpoint.ReadFileSourceLog(fs, dir)
	if err != nil {
		return nil, nil, err
	}
	moves, err := readMoves(fs, dir)
	if err != nil {
		return nil, nil, err
	}
	return lg.Entries, moves, nil
}

// recordMove is Open's part of a move CheckMove admitted: it publishes the
// move record (unless the newest one is this move: a start that crashed
// after writing it) and returns every record in force, and whether it
// wrote one.
func recordMove(fs vfs.FS, dir string, admitted move) ([]move, bool, error) {
	moves, err := readMoves(fs, dir)
	if err != nil {
		return nil, false, err
	}
	if admitted.From == "" || (len(moves) > 0 && moves[len(moves)-1] == admitted) {
		return moves, false, nil
	}
	l := moveLog(fs, dir)
	if err := fs.MkdirAll(l.Dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("create source move record dir %s: %w", l.Dir, err)
	}
	if err := l.Add(int64(len(moves)), admitted); err != nil {
		return nil, false, fmt.Errorf("record the source's move from %s to %s: %w", admitted.From, admitted.To, err)
	}
	return append(moves, admitted), true, nil
}
