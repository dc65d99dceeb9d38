package s3archive

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// TestScenarios runs the admission lifecycle scripts in testdata/ (regenerate
// with -rewrite). Commands:
//
//	write first=YYYY-MM-DD days=N [per-day=R] [parts=P] [era=E]   write daily files
//	damage day=YYYY-MM-DD | repair day=YYYY-MM-DD                  truncate / restore part 0
//	open [max-files=N] [max-bytes=N] [skip-unreadable] [retain=N]  a new Source (a restart) on the same checkpoint
//	                                                               (retain: the engine's minBatchesToRetain)
//	available-now                                                  PrepareAvailableNow
//	latest start=-|N                                               LatestOffset
//	advance start=-|N times=K                                      LatestOffset K times, each from the last end: the last end
//	read start=-|N end=N                                           ReadBatch: files and rows read
//	log                                                            the source log files, timestamps elided
//	files                                                          the source log's file names, in id order
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		root := t.TempDir()
		fs := vfs.NewMem()
		env := testEnv(t, fs)
		var s *Source
		saved := map[string][]byte{}
		off := func(td *datadriven.TestData, key string) stream.Offset {
			var v string
			td.ScanArgs(t, key, &v)
			if v == "-" {
				return nil
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: bad %s=%s", td.Pos, key, v)
			}
			return formatOffset(n)
		}
		clean := func(s string) string {
			s = strings.ReplaceAll(s, fileURI(root), "$ROOT")
			return regexp.MustCompile(`"timestamp":\d+`).ReplaceAllString(s, `"timestamp":T`)
		}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "write":
				var first string
				days, perDay, parts, era := 1, 2, 1, "modern"
				td.ScanArgs(t, "first", &first)
				td.MaybeScanArgs(t, "days", &days)
				td.MaybeScanArgs(t, "per-day", &perDay)
				td.MaybeScanArgs(t, "parts", &parts)
				td.MaybeScanArgs(t, "era", &era)
				d0, err := time.Parse(time.DateOnly, first)
				if err != nil {
					t.Fatal(err)
				}
				for d := range days {
					day := d0.AddDate(0, 0, d)
					for p := range parts {
						writeEra(t, dayPath(root, day, p), era, genBlocks(day.Unix()/12+int64(p*perDay), perDay, day.Add(time.Duration(p*perDay)*12*time.Second)))
					}
				}
				return ""
			case "damage", "repair":
				var day string
				td.ScanArgs(t, "day", &day)
				d, _ := time.Parse(time.DateOnly, day)
				p := dayPath(root, d, 0)
				if td.Cmd == "damage" {
					data, err := os.ReadFile(p)
					if err != nil {
						t.Fatal(err)
					}
					saved[p] = data
					data = data[:len(data)-10]
					if err := os.WriteFile(p, data, 0o644); err != nil {
						t.Fatal(err)
					}
				} else if err := os.WriteFile(p, saved[p], 0o644); err != nil {
					t.Fatal(err)
				}
				return ""
			case "open":
				o := Options{URI: fileURI(root)}
				td.MaybeScanArgs(t, "max-files", &o.MaxFilesPerTrigger)
				td.MaybeScanArgs(t, "max-bytes", &o.MaxBytesPerTrigger)
				o.SkipUnreadable = td.HasArg("skip-unreadable")
				env.MinBatchesToRetain = 0
				td.MaybeScanArgs(t, "retain", &env.MinBatchesToRetain)
				var err error
				if s, err = New(o); err != nil {
					return "error: " + err.Error()
				}
				if err := s.Open(t.Context(), env); err != nil {
					return "error: " + errcode.Code(err)
				}
				return ""
			case "available-now":
				if err := s.PrepareAvailableNow(t.Context()); err != nil {
					return "error: " + err.Error()
				}
				return ""
			case "latest":
				o, err := s.LatestOffset(t.Context(), off(td, "start"))
				if err != nil {
					return "error: " + errcode.Code(err)
				}
				if o == nil {
					return "nil"
				}
				return string(o)
			case "advance":
				var times int
				td.ScanArgs(t, "times", &times)
				o := off(td, "start")
				for range times {
					next, err := s.LatestOffset(t.Context(), o)
					if err != nil {
						return "error: " + errcode.Code(err)
					}
					o = next
				}
				if o == nil {
					return "nil"
				}
				return string(o)
			case "files":
				return strings.Join(logNames(t, fs, env.MetadataDir), " ")
			case "read":
				var out strings.Builder
				rows := 0
				var last int64 = -1
				err := s.ReadBatch(t.Context(), off(td, "start"), off(td, "end"), func(b *stream.Batch) error {
					rows += b.Len
					if c := b.Column(ethblock.ColBlockTS); c != nil && b.Len > 0 {
						d := time.UnixMicro(c.Int64s[0]).UTC().Format(time.DateOnly)
						if c.Int64s[0] < last {
							return fmt.Errorf("rows out of order")
						}
						last = c.Int64s[b.Len-1]
						fmt.Fprintf(&out, "%s rows=%d\n", d, b.Len)
					}
					return nil
				})
				if err != nil {
					return clean(out.String() + "error: " + errcode.Code(err) + " " + pathOf(err) + "\n")
				}
				fmt.Fprintf(&out, "total rows=%d skipped=%s\n", rows, s.Metrics()["skippedFiles"])
				return clean(out.String())
			case "log":
				var out strings.Builder
				for _, n := range logNames(t, fs, env.MetadataDir) {
					f, err := fs.Open(fs.PathJoin(env.MetadataDir, n))
					if err != nil {
						t.Fatal(err)
					}
					data, _ := io.ReadAll(f)
					f.Close()
					fmt.Fprintf(&out, "%s:\n%s\n", n, clean(string(data)))
				}
				return out.String()
			}
			t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			return ""
		})
	})
}

// logNames lists the source log directory in id order.
func logNames(t testing.TB, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(names, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimSuffix(names[i], ".compact"))
		b, _ := strconv.Atoi(strings.TrimSuffix(names[j], ".compact"))
		return a < b
	})
	return names
}

func pathOf(err error) string {
	var e *errcode.Error
	if errorsAs(err, &e) {
		return e.Path
	}
	return ""
}
