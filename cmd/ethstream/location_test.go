package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/storage/s3test"
)

// locationCommands are every command that takes a checkpoint or a table,
// with {ck}, {tbl}, {cache}, {out} and {arch} placeholders. Each must take
// every location run takes (issue 25: table show mangled s3:// into s3:/,
// checkpoint verify, ui --checkpoint and progress --phase said "does not
// exist").
var locationCommands = [][]string{
	{"checkpoint", "inspect", "{ck}"},
	{"checkpoint", "inspect", "{ck}", "--json"},
	{"checkpoint", "verify", "{ck}", "--table", "{tbl}"},
	{"checkpoint", "verify", "{ck}"},
	{"plan", "--checkpoint", "{ck}", "--table", "{tbl}", "--source", "s3_backfill=s3archive:{arch}", "--conf", evolution},
	{"state", "dump", "--checkpoint", "{ck}"},
	{"table", "show", "{tbl}"},
	{"table", "history", "{tbl}"},
	{"table", "optimize", "{tbl}"},
	{"table", "vacuum", "{tbl}"},
	{"progress", "--out", "{out}", "--phase", "backfill={ck}"},
	{"ui", "--checkpoint", "{ck}", "--ui-addr", "127.0.0.1:0"},
	{"checkpoint", "repartition", "{ck}", "--partitions", "4", "--local-dir", "{cache}", "--dry-run"},
	{"checkpoint", "repartition", "{ck}", "--partitions", "4", "--local-dir", "{cache}"},
}

// TestEveryCommandTakesEveryLocation runs the query once on a local
// checkpoint and table and once on each S3 server (the embedded endpoint
// over loopback; Versity Gateway when set up), then every command that
// takes a checkpoint or a table on them: each succeeds, and prints the same
// rows, state and report whatever the storage (ids, times and paths aside).
func TestEveryCommandTakesEveryLocation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the query on every storage")
	}
	_, arch := archiveURI(t)
	run := func(t *testing.T, ck, tbl string) map[string]string {
		base := t.TempDir()
		vars := map[string]string{"ck": ck, "tbl": tbl, "cache": filepath.Join(base, "cache"), "out": filepath.Join(base, "out"), "arch": arch}
		expand := func(args []string) []string {
			out := make([]string, len(args))
			for i, a := range args {
				for k, v := range vars {
					a = strings.ReplaceAll(a, "{"+k+"}", v)
				}
				out[i] = a
			}
			return out
		}
		ctx := context.Background()
		if code, out, errOut := cli(t, ctx, expand([]string{"run", "--checkpoint", "{ck}", "--table", "{tbl}", "--local-dir", "{cache}",
			"--source", "s3_backfill=s3archive:{arch}", "--conf", evolution, "--conf", "spark.sql.shuffle.partitions=8"})...); code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
		}
		outputs := map[string]string{}
		for _, c := range locationCommands {
			args := expand(c)
			cctx := ctx
			if c[0] == "ui" {
				// It serves until interrupted: already interrupted, it
				// starts, prints its address and stops.
				var cancel context.CancelFunc
				cctx, cancel = context.WithCancel(ctx)
				cancel()
			}
			code, out, errOut := cli(t, cctx, args...)
			if code != 0 {
				t.Errorf("%q: exit %d\n%s\n%s", args, code, out, errOut)
				continue
			}
			if strings.Contains(out+errOut, "s3:/"+vars["ck"]) || regexp.MustCompile(`s3:/[^/]`).MatchString(out+errOut) {
				t.Errorf("%q: a mangled s3:// location in the output:\n%s%s", args, out, errOut)
			}
			outputs[strings.Join(c, " ")] = out
		}
		for _, name := range []string{"batches.csv", "sources.csv"} {
			b, err := os.ReadFile(filepath.Join(vars["out"], name))
			if err != nil || strings.Count(string(b), "\n") < 2 {
				t.Errorf("progress --phase backfill={ck}: %s: %v %q", name, err, b)
			}
		}
		return outputs
	}
	local := t.TempDir()
	want := run(t, filepath.Join(local, "ck"), filepath.Join(local, "tbl"))
	// What may differ between two runs of one query on two storages.
	volatile := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d\d-\d\dT[\d:.]+Z\s+\d{4}-\d\d-\d\dT[\d:.]+Z|"?timestamp"?:? ?\d+|\d+ ms|\d+ bytes|s3://\S+|` +
		regexp.QuoteMeta(local) + `\S*`)
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		got := run(t, s.Location("q/ck"), s.Location("q/tbl"))
		// table show prints rows in file order, which the parallel writes
		// of a batch do not fix: the rows compare as a set.
		rows := func(s string) string {
			l := strings.Split(s, "\n")
			sort.Strings(l)
			return strings.Join(l, "\n")
		}
		for _, cmd := range []string{"table show {tbl}", "state dump --checkpoint {ck}"} {
			if rows(got[cmd]) != rows(want[cmd]) || strings.Count(got[cmd], "\n") < 10 {
				t.Errorf("%s on %s prints other rows than on the local disk:\n%s\nlocal:\n%s", cmd, s.Name, got[cmd], want[cmd])
			}
		}
		for _, cmd := range []string{"checkpoint inspect {ck}", "checkpoint verify {ck} --table {tbl}"} {
			g, w := volatile.ReplaceAllString(got[cmd], "X"), volatile.ReplaceAllString(want[cmd], "X")
			if strings.Count(g, "\n") != strings.Count(w, "\n") {
				t.Errorf("%s on %s:\n%s\nlocal:\n%s", cmd, s.Name, got[cmd], want[cmd])
			}
		}
	})
}

// TestLookalikeLocationsAreRefused: a location one slash or one colon short
// of a URI is INVALID_ARGUMENT with the fix, by every command that takes a
// checkpoint or a table, and nothing is created (once --checkpoint s3:/lake/q
// exited 0 having created ./s3:/lake/q).
func TestLookalikeLocationsAreRefused(t *testing.T) {
	_, arch := archiveURI(t)
	for _, bad := range []string{"s3:/lake/q", "s3:lake/q", "S3//lake/q", "file:relative/q"} {
		cmds := append([][]string{
			{"run", "--checkpoint", "{ck}", "--table", "tbl", "--source", "s3_backfill=s3archive:{arch}", "--conf", evolution},
			{"run", "--checkpoint", "ck", "--table", "{tbl}", "--source", "s3_backfill=s3archive:{arch}", "--conf", evolution},
			{"run", "--checkpoint", "ck", "--table", "tbl", "--local-dir", "{ck}", "--source", "s3_backfill=s3archive:{arch}", "--conf", evolution},
			{"run", "--checkpoint", "ck", "--table", "tbl", "--progress", "{ck}", "--source", "s3_backfill=s3archive:{arch}", "--conf", evolution},
		}, locationCommands...)
		for _, c := range cmds {
			dir := t.TempDir()
			t.Chdir(dir)
			args := make([]string, len(c))
			for i, a := range c {
				a = strings.NewReplacer("{ck}", bad, "{tbl}", bad, "{arch}", arch, "{cache}", "cache", "{out}", "out").Replace(a)
				args[i] = a
			}
			ctx, cancel := context.WithCancel(context.Background())
			if c[0] == "ui" {
				cancel()
			}
			code, _, errOut := cli(t, ctx, args...)
			cancel()
			checkRefusal(t, strings.Join(args, " "), code, errOut, "INVALID_ARGUMENT", 2)
			if !strings.Contains(errOut, "looks like a") || !strings.Contains(errOut, "://") {
				t.Errorf("%q: %q", args, errOut)
			}
			if es, _ := os.ReadDir(dir); len(es) != 0 {
				t.Errorf("%q created %v", args, es)
			}
		}
	}
}
