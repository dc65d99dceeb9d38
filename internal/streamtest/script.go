package streamtest

import (
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// Root is the directory a World's checkpoint lives in on its fault FS.
const Root = "/ckpt"

// World is what one script acts on: everything that outlives a process
// restart inside the script (the file system, the clock, the data behind the
// sources, the sink's table) and the crash points its doubles share.
type World struct {
	T      *testing.T
	Faults *FaultFS
	Clock  *Clock
	Points *Points
	Sink   *Sink
	// Sources are the named sources the script created, by name.
	Sources map[string]*Source

	atEnd []func()
}

// AtEnd registers f to run when the script ends, before the test's
// cleanups (which remove its temporary directories): where a script closes
// what it opened.
func (w *World) AtEnd(f func()) { w.atEnd = append(w.atEnd, f) }

// NewWorld returns an empty world: an empty fault FS rooted at Root, a
// clock at Epoch, no armed crash point, an empty sink.
func NewWorld(t *testing.T) *World {
	w := &World{T: t, Faults: NewFaultFS(Root), Clock: NewClock(Epoch), Points: &Points{}, Sources: map[string]*Source{}}
	w.Sink = NewSink()
	w.Sink.Points = w.Points
	return w
}

// Source returns the world's source called name, creating it (with the
// world's crash points) on first use.
func (w *World) Source(name string) *Source {
	s, ok := w.Sources[name]
	if !ok {
		s = NewSource(name)
		s.Points = w.Points
		w.Sources[name] = s
	}
	return s
}

// Handler runs one script command and returns its output.
type Handler func(w *World, d *datadriven.TestData) string

// Commands is a command set: command name -> handler.
type Commands map[string]Handler

// Builtins returns the commands every script has:
//
//	fault            (input: errorfs DSL, or "off") arm a file system fault
//	crash [at=P]     without at: a machine crash now (unsynced data is lost);
//	                 with at: arm crash points (see Points) for the next run
//	clock [advance=D] [step=D]
//	                 move the manual clock; prints its time
//	inspect files [dir=D] | inspect cat path=P | inspect sink
//	                 the checkpoint's files (path and size), one file, the sink's table
func Builtins() Commands {
	return Commands{"fault": cmdFault, "crash": cmdCrash, "clock": cmdClock, "inspect": cmdInspect}
}

// Walk runs every datadriven script under dir, each with a new World and
// the command set setup returns for it on top of Builtins (a package's own
// command overrides a built-in of the same name). A command no set knows
// fails the test.
func Walk(t *testing.T, dir string, setup func(w *World) Commands) {
	datadriven.Walk(t, dir, func(t *testing.T, path string) {
		w := NewWorld(t)
		defer func() { // also after a t.Fatal
			for i := len(w.atEnd) - 1; i >= 0; i-- {
				w.atEnd[i]()
			}
		}()
		cmds := Builtins()
		for name, h := range setup(w) {
			cmds[name] = h
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			w.T = t
			h, ok := cmds[d.Cmd]
			if !ok {
				t.Fatalf("%s: unknown command %q (known: %s)", d.Pos, d.Cmd, strings.Join(names(cmds), ", "))
			}
			return h(w, d)
		})
	})
}

func names(cmds Commands) []string {
	var ns []string
	for n := range cmds {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}
