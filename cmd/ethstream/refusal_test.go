package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/pipeline"
)

const (
	evolution = "spark.sql.streaming.queryEvolution.enableSourceEvolution=true"
	runOnly   = "run only"
)

// refusalEnv holds the paths and servers a refusal row's arguments name.
type refusalEnv struct {
	ck, tbl, cache string // the query's checkpoint, table and state cache
	vars           map[string]string
}

// expand replaces {name} placeholders in args.
func (e *refusalEnv) expand(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for k, v := range e.vars {
			a = strings.ReplaceAll(a, "{"+k+"}", v)
		}
		out[i] = a
	}
	return out
}

// checkRefusal asserts the shape every refusal has: exit code, one line
// "error: CODE: message. To fix: remedy", the code once, and nothing of Go's
// internals.
func checkRefusal(t *testing.T, what string, code int, stderr, wantCode string, wantExit int) {
	t.Helper()
	if code != wantExit {
		t.Errorf("%s: exit %d, want %d; stderr %q", what, code, wantExit, stderr)
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	last := lines[len(lines)-1] // slog warnings may precede the error
	if !strings.HasPrefix(last, "error: "+wantCode+": ") {
		t.Errorf("%s: want code %s, stderr %q", what, wantCode, stderr)
		return
	}
	if !strings.Contains(last, ". To fix: ") {
		t.Errorf("%s: no remedy: %q", what, last)
	}
	if n := strings.Count(last, wantCode+":"); n != 1 {
		t.Errorf("%s: code printed %d times: %q", what, n, last)
	}
	for _, internal := range []string{"goroutine ", "panic", "strconv.", "runtime error", "operation error S3", "RequestID"} {
		if strings.Contains(stderr, internal) {
			t.Errorf("%s: stderr shows Go or SDK internals (%q): %q", what, internal, stderr)
		}
	}
}

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestRefusalsRunAndPlan runs every refused start through both run and plan:
// the same code and exit status from both; an existing checkpoint, its table
// and its state cache stay byte-identical; a refused first start creates no
// file or directory at all (no checkpoint, no .lock, no table, no cache); and
// the query still runs afterwards.
func TestRefusalsRunAndPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and runs the query")
	}
	ctx := context.Background()
	_, arch := archiveURI(t)
	fixtures := t.TempDir()
	empty := filepath.Join(fixtures, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(fixtures, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on: listen, then close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	vars := map[string]string{"arch": arch, "s3": startS3(t), "rpc": startNode(t), "down": down,
		"emptyuri": "file://" + empty, "empty": empty, "file": file, "nosuch": "file:///nonexistent/ethstream/blocks"}

	// The existing query: one committed batch of the archive.
	existing := &refusalEnv{vars: map[string]string{}}
	base := t.TempDir()
	existing.ck, existing.tbl, existing.cache = filepath.Join(base, "ck"), filepath.Join(base, "tbl"), filepath.Join(base, "cache")
	good := []string{"--checkpoint", existing.ck, "--table", existing.tbl, "--local-dir", existing.cache,
		"--source", "s3_backfill=s3archive:" + arch, "--conf", evolution}
	if code, out, errOut := cli(t, ctx, append([]string{"run"}, good...)...); code != 0 {
		t.Fatalf("first run: exit %d\n%s\n%s", code, out, errOut)
	}

	q := []string{"--checkpoint", "{ck}", "--table", "{tbl}", "--local-dir", "{cache}"}
	with := func(extra ...string) []string { return append(append([]string{}, q...), extra...) }
	src := []string{"--source", "s3_backfill=s3archive:{arch}", "--conf", evolution}
	rows := []struct {
		name string
		args []string
		code string
		exit int
		// first: a first start (fresh directories); else the existing query.
		first bool
		// runOnly: plan accepts it (plan reads no table, so --table is
		// optional; it serves no metrics).
		runOnly string
	}{
		{"missing --checkpoint", []string{"--table", "{tbl}", "--source", "s3_backfill=s3archive:{arch}"}, "MISSING_REQUIRED_FLAG", 2, true, ""},
		{"missing --table", []string{"--checkpoint", "{ck}", "--source", "s3_backfill=s3archive:{arch}"}, "MISSING_REQUIRED_FLAG", 2, true, runOnly},
		{"missing --source", with("--conf", evolution), "MISSING_REQUIRED_FLAG", 2, true, ""},
		{"unknown flag", with(append(src, "--bogus")...), "INVALID_ARGUMENT", 2, true, ""},
		{"--source without NAME=", with("--source", "s3archive:s3://archive/v1.0/eth/blocks?endpoint={s3}", "--conf", evolution), "INVALID_ARGUMENT", 2, true, ""},
		{"unknown source format", with("--source", "eth_live=bogus:x", "--conf", evolution), "INVALID_ARGUMENT", 2, true, ""},
		{"unknown source format, existing", with("--source", "eth_live=bogus:x", "--conf", evolution), "INVALID_ARGUMENT", 2, false, ""},
		{"unknown s3archive option", with("--source", "s3_backfill=s3archive:{arch}?maxFiles=3", "--conf", evolution), "INVALID_ARGUMENT", 2, true, ""},
		{"bad s3archive option value", with("--source", "s3_backfill=s3archive:{arch}?anonymous=maybe", "--conf", evolution), "INVALID_ARGUMENT", 2, true, ""},
		{"--max-batches -1", with(append(src, "--max-batches", "-1")...), "INVALID_ARGUMENT", 2, true, ""},
		// Spark's withWatermark: the delay must not be negative (0 is a watermark).
		{"negative --with-watermark delay", with(append(src, "--with-watermark", "block_ts, -1 hour")...), "INVALID_ARGUMENT", 2, true, ""},
		{"unknown trigger", with(append(src, "--trigger", "continuous")...), "INVALID_ARGUMENT", 2, true, ""},
		{"negative trigger interval", with(append(src, "--trigger", "processingTime=-5s")...), "INVALID_ARGUMENT", 2, true, ""},
		{"bad conf value", with(append(src, "--conf", "spark.sql.shuffle.partitions=many")...), "INVALID_ARGUMENT", 2, true, ""},
		{"shuffle partitions above the maximum", with(append(src, "--conf", "spark.sql.shuffle.partitions=10001")...), "INVALID_ARGUMENT", 2, true, ""},
		{"shuffle partitions beyond the open-file limit", with(append(src, "--conf", "spark.sql.shuffle.partitions=10000")...), "OPEN_FILE_LIMIT_TOO_LOW", 1, true, ""},
		{"state partitions above the maximum", with(append(src, "--conf", "spark.sql.streaming.stateStore.partitions=20000")...), "INVALID_ARGUMENT", 2, false, ""},
		{"state partitions beyond the open-file limit", with(append(src, "--conf", "spark.sql.streaming.stateStore.partitions=5000")...), "OPEN_FILE_LIMIT_TOO_LOW", 1, false, ""},
		{"other state store provider", with(append(src, "--conf", "spark.sql.streaming.stateStore.providerClass=rocksdb")...), "INVALID_ARGUMENT", 2, true, ""},
		{"named source without evolution", with("--source", "s3_backfill=s3archive:{arch}"), "STREAMING_QUERY_EVOLUTION_ERROR.SOURCE_NAMING_NOT_SUPPORTED", 1, true, ""},
		{"unnamed source on a named checkpoint", with("--source", "=s3archive:{arch}"), "STREAMING_QUERY_EVOLUTION_ERROR.CONFIG_MISMATCH", 1, false, ""},
		{"file:// archive that does not exist", with("--source", "s3_backfill=s3archive:{nosuch}", "--conf", evolution), "ARCHIVE_NOT_FOUND", 1, true, ""},
		{"archive without block files", with("--source", "s3_backfill=s3archive:{emptyuri}", "--conf", evolution), "ARCHIVE_EMPTY", 1, true, ""},
		{"s3 prefix without block files", with("--source", "s3_backfill=s3archive:s3://archive/v1.0/btc/blocks?endpoint={s3}&anonymous=true", "--conf", evolution), "ARCHIVE_EMPTY", 1, true, ""},
		{"s3 wrong bucket", with("--source", "s3_backfill=s3archive:s3://no-such-bucket/v1.0/eth/blocks?endpoint={s3}&anonymous=true", "--conf", evolution), "ARCHIVE_FILE_UNREADABLE", 1, true, ""},
		{"s3 endpoint down", with("--source", "s3_backfill=s3archive:s3://archive/v1.0/eth/blocks?endpoint={down}&anonymous=true", "--conf", evolution), "STORAGE_UNAVAILABLE", 1, true, ""},
		{"rpc endpoint down", with("--source", "eth_live=ethrpc:{down}", "--conf", evolution), "RPC_UNAVAILABLE", 1, true, ""},
		{"rpc endpoint down, existing", with(append(src, "--source", "eth_live=ethrpc:{down}")...), "RPC_UNAVAILABLE", 1, false, ""},
		{"confirmations=-1", with("--source", "eth_live=ethrpc:{rpc}?confirmations=-1", "--conf", evolution), "INVALID_ARGUMENT", 2, true, ""},
		{"malformed start_parent_hash", with("--source", "eth_live=ethrpc:{rpc}?start_parent_hash=0x12", "--conf", evolution), "INVALID_ARGUMENT", 2, true, ""},
		{"unknown ethrpc option", with("--source", "eth_live=ethrpc:{rpc}?confirmation=3", "--conf", evolution), "INVALID_ARGUMENT", 2, true, ""},
		{"table is a file", append([]string{"--checkpoint", "{ck}", "--table", "{file}", "--local-dir", "{cache}"}, src...), "DELTA_TABLE_PATH_NOT_A_DIRECTORY", 1, true, ""},
		{"table under a file", append([]string{"--checkpoint", "{ck}", "--table", "{file}/tbl", "--local-dir", "{cache}"}, src...), "DELTA_TABLE_PATH_NOT_A_DIRECTORY", 1, true, ""},
		// A missing directory is created by the first event (TestProgressCreatesItsDirectory);
		// one that cannot be (under a regular file) is refused before anything is written.
		{"--progress under a regular file", with(append(src, "--progress", "{file}/dir/progress.jsonl")...), "INVALID_ARGUMENT", 1, true, ""},
		{"--progress is a regular file's child", with(append(src, "--progress", "{file}/progress.jsonl")...), "INVALID_ARGUMENT", 1, true, ""},
		{"empty --query", with(append(src, "--query", "")...), "INVALID_ARGUMENT", 2, true, ""},
		{"empty --query, existing", with(append(src, "--query", " ")...), "INVALID_ARGUMENT", 2, false, ""},
		{"--max-batches out of range", with(append(src, "--max-batches", "99999999999999999999")...), "INVALID_ARGUMENT", 2, false, ""},
		{"conf key a typo away", with(append(src, "--conf", "spark.sql.shufle.partitions=8")...), "INVALID_ARGUMENT", 2, true, ""},
		{"conf key a typo away, existing", with(append(src, "--conf", "spark.sql.streaming.stateStore.partition=8")...), "INVALID_ARGUMENT", 2, false, ""},
		{"--metrics-addr on every interface", with(append(src, "--metrics-addr", "0.0.0.0:0")...), "INVALID_ARGUMENT", 2, false, runOnly},
		{"--ui-addr on every interface", with(append(src, "--ui-addr", ":0")...), "INVALID_ARGUMENT", 2, false, runOnly},
		{"--progress is a directory", with(append(src, "--progress", "{empty}")...), "INVALID_ARGUMENT", 1, true, ""},
		{"--metrics-addr without a port", with(append(src, "--metrics-addr", "bogus")...), "INVALID_ARGUMENT", 1, true, runOnly},
		{"--cpuprofile in a missing directory", append([]string{"--cpuprofile", "/no/such/dir/x.prof"}, with(src...)...), "INVALID_ARGUMENT", 1, true, ""},
	}
	for _, r := range rows {
		for _, cmd := range []string{"run", "plan"} {
			if cmd == "plan" && r.runOnly != "" {
				continue
			}
			env := existing
			if r.first {
				b := t.TempDir()
				env = &refusalEnv{ck: filepath.Join(b, "ck"), tbl: filepath.Join(b, "tbl"), cache: filepath.Join(b, "cache")}
			}
			env.vars = map[string]string{"ck": env.ck, "tbl": env.tbl, "cache": env.cache}
			for k, v := range vars {
				env.vars[k] = v
			}
			args := env.expand(r.args)
			// --cpuprofile is a root flag: it goes before the command.
			if args[0] == "--cpuprofile" {
				args = append(append(args[:2:2], cmd), args[2:]...)
			} else {
				args = append([]string{cmd}, args...)
			}
			parent := filepath.Dir(env.ck)
			before := entries(t, parent)
			hashes := []string{treeHash(t, env.ck), treeHash(t, env.tbl), treeHash(t, env.cache)}
			code, _, stderr := cli(t, ctx, args...)
			what := cmd + ": " + r.name
			checkRefusal(t, what, code, stderr, r.code, r.exit)
			if after := entries(t, parent); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("%s: created %v (had %v)", what, after, before)
			}
			for i, dir := range []string{env.ck, env.tbl, env.cache} {
				if h := treeHash(t, dir); h != hashes[i] {
					t.Errorf("%s: %s changed", what, dir)
				}
			}
			if r.first {
				if _, err := os.Stat(pipeline.DefaultLocalDir(env.ck)); !os.IsNotExist(err) {
					t.Errorf("%s: default cache directory created: %v", what, err)
				}
			}
		}
	}
	// The query is still usable: a plain restart and a repartition succeed.
	if code, out, errOut := cli(t, ctx, append([]string{"run"}, good...)...); code != 0 {
		t.Fatalf("run after the refusals: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := cli(t, ctx, "checkpoint", "repartition", existing.ck, "--partitions", "8", "--local-dir", existing.cache); code != 0 {
		t.Fatalf("repartition after the refusals: exit %d\n%s\n%s", code, out, errOut)
	}
}
