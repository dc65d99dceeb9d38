package streamtest

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// cmdInspect prints the checkpoint's files, one file, or the sink's table.
func cmdInspect(w *World, d *datadriven.TestData) string {
	if len(d.CmdArgs) == 0 {
		w.T.Fatalf("%s: inspect files|cat|sink", d.Pos)
	}
	fs := w.Faults.Mem() // inspecting is not an operation of the code under test
	switch d.CmdArgs[0].Key {
	case "files":
		dir := Root
		if arg, ok := d.Arg("dir"); ok {
			dir = fs.PathJoin(Root, arg.SingleVal(w.T))
		}
		return lines(Files(fs, dir))
	case "cat":
		var p string
		d.ScanArgs(w.T, "path", &p)
		f, err := fs.Open(fs.PathJoin(Root, p))
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		defer f.Close()
		data, err := io.ReadAll(f)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		s := string(data)
		if !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		return s
	case "sink":
		return lines(w.Sink.Lines())
	}
	w.T.Fatalf("%s: inspect %s: want files, cat or sink", d.Pos, d.CmdArgs[0].Key)
	return ""
}

// Files lists every file under dir as "<path relative to dir> <size>",
// and every directory as "<path>/", sorted: two equal lists are the same
// tree of names and sizes.
func Files(fs vfs.FS, dir string) []string {
	var out []string
	var walk func(string, string)
	walk = func(abs, rel string) {
		names, err := fs.List(abs)
		if err != nil {
			return
		}
		for _, n := range names {
			p, r := fs.PathJoin(abs, n), n
			if rel != "" {
				r = rel + "/" + n
			}
			st, err := fs.Stat(p)
			if err != nil {
				continue
			}
			if st.IsDir() {
				out = append(out, r+"/")
				walk(p, r)
				continue
			}
			out = append(out, fmt.Sprintf("%s %d", r, st.Size()))
		}
	}
	walk(dir, "")
	sort.Strings(out)
	return out
}

func lines(ls []string) string {
	if len(ls) == 0 {
		return "(empty)\n"
	}
	return strings.Join(ls, "\n") + "\n"
}
