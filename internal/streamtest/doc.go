// Package streamtest is the shared test harness of ethstream, in the manner
// of etcd's rafttest: in-memory twins of the stream contracts, a manual
// clock, a fault-injecting file system driven by pebble's errorfs DSL, and a
// datadriven command set that scenario scripts share. Production code never
// imports it (stream/layers_test.go checks that); tests of any package may.
//
// # Doubles
//
//   - Source: a stream.Source over rows a test appends (retractions
//     included, Batch.Signs), offset {"n":<rows consumed>}, an optional read
//     limit per batch, trigger availableNow.
//   - Sink: a stream.Sink that MERGEs each batch into a table by the output
//     schema's key (or its Key; appends when there is none) and applies a
//     batch id once, as the Delta sink's txn action does; it records every
//     batch it applied. Failures schedules AddBatch errors that are not
//     crashes; Plain hands the engine the same table as a bare stream.Sink
//     (no identity, no record: no table checks).
//   - PassThrough: a stateless stream.Operator handing its input to the sink.
//   - Clock: a manual stream.Clock; Sleep advances time at once.
//   - FaultFS: a vfs.FS over a crashable in-memory FS whose faults are
//     errorfs DSL text, e.g. (ErrInjected (And Writes (PathMatch "offsets/*"))),
//     and whose Crash drops what was not synced (pebble's CrashClone).
//   - Points: named crash points as text ("after-sink", "read-mid@2") that
//     the doubles above, and a test's own wrappers of real components, hit.
//
// # Scripts
//
// Walk runs every datadriven file of a directory with a fresh World (the
// clock, the fault FS, the crash points, the sources and the sink) and a
// command set: the built-in commands of Builtins (fault, crash, clock,
// inspect), each in its own cmd_*.go file, plus the package's own (batch,
// start, restart ...), one handler per command. A package test thereby
// writes only what is its own.
//
// None of the types is safe for concurrent mutation by several goroutines
// unless its comment says so: the engine calls a source, an operator and a
// sink from one goroutine at a time.
package streamtest
