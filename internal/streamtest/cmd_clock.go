package streamtest

import (
	"time"

	"github.com/cockroachdb/datadriven"
)

// cmdClock moves the manual clock (advance=D) or sets its step per Now
// (step=D), and prints its time without moving it.
func cmdClock(w *World, d *datadriven.TestData) string {
	if arg, ok := d.Arg("advance"); ok {
		v, err := time.ParseDuration(arg.SingleVal(w.T))
		if err != nil {
			w.T.Fatalf("%s: %v", d.Pos, err)
		}
		w.Clock.Advance(v)
	}
	if arg, ok := d.Arg("step"); ok {
		v, err := time.ParseDuration(arg.SingleVal(w.T))
		if err != nil {
			w.T.Fatalf("%s: %v", d.Pos, err)
		}
		w.Clock.SetStep(v)
	}
	w.Clock.mu.Lock()
	now := w.Clock.now
	w.Clock.mu.Unlock()
	return now.Format(time.RFC3339Nano) + "\n"
}
