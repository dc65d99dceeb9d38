package streamtest

import (
	"fmt"

	"github.com/cockroachdb/datadriven"
)

// cmdFault arms the fault its input writes in errorfs's DSL ("off" or no
// input disarms) and prints it as errorfs parsed it; "fault show" prints the
// armed fault and how many faults it injected.
func cmdFault(w *World, d *datadriven.TestData) string {
	if d.HasArg("show") {
		return fmt.Sprintf("%s injected=%d\n", w.Faults, w.Faults.Injected())
	}
	armed, err := w.Faults.Arm(d.Input)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return "fault " + armed + "\n"
}
