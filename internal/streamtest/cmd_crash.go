package streamtest

import (
	"strings"

	"github.com/cockroachdb/datadriven"
)

// cmdCrash is a machine crash now (the fault FS keeps only what was
// synced), or with at=P arms crash points for what runs next.
func cmdCrash(w *World, d *datadriven.TestData) string {
	if arg, ok := d.Arg("at"); ok {
		at := strings.Join(arg.Vals, ",")
		if err := w.Points.Arm(at); err != nil {
			return "error: " + err.Error() + "\n"
		}
		return "armed " + at + "\n"
	}
	before := Files(w.Faults.Mem(), Root)
	w.Faults.Crash()
	lost := diff(before, Files(w.Faults.Mem(), Root))
	if len(lost) == 0 {
		return "crashed: every file and byte was synced\n"
	}
	return "crashed: lost " + strings.Join(lost, ", ") + "\n"
}

// diff returns the lines of before not in after.
func diff(before, after []string) []string {
	in := map[string]bool{}
	for _, l := range after {
		in[l] = true
	}
	var out []string
	for _, l := range before {
		if !in[l] {
			out = append(out, l)
		}
	}
	return out
}
