// Package relocate copies a stopped query's checkpoint, and its Delta table,
// between any two locations the storage layer reaches (a local directory,
// file://, s3://): `ethstream checkpoint copy SRC DST [--table SRC DST]`.
// The copy resumes as the same query: the engine recognises the table by
// its Delta metadata id and the query's txn, not by its path (restart
// rules, engine/restart_rules.go), so the copied checkpoint runs on the
// copied table wherever both are.
//
// # Procedure
//
//  1. Validate, writing nothing: SRC is a checkpoint (it holds metadata),
//     the table source (if given) is a Delta table, each destination holds
//     no file (or only what an unfinished copy left: the marker below
//     names it), and no destination lies inside a source or the other way
//     round.
//  2. Take the source checkpoint's lock (checkpoint.Lock, the lock a query
//     takes): a running query refuses the copy with CHECKPOINT_LOCKED, and
//     no query can start on the source while the copy reads it. On a local
//     disk this is the .lock file every run leaves; on S3 a new lease
//     generation under .lock/. Nothing else of the source is written.
//  3. Publish the marker <DST>/copy-in-progress (below). From here on a
//     reader of DST (run, plan, inspect, verify: checkpoint.ReadSnapshot)
//     refuses it with CHECKPOINT_COPY_INCOMPLETE.
//  4. Copy the table: the data files (every file outside _delta_log), then
//     the _delta_log files in name order (commits are zero-padded versions,
//     so that is version order), _last_checkpoint last. A table copy cut
//     short is therefore a consistent older version of the table, never one
//     whose log names a missing file.
//  5. Copy the checkpoint: every file but the lock (.lock, or the lease
//     objects under .lock/), temp files of unfinished publishes (ignored by
//     every reader) and the marker.
//  6. Remove the marker. The copy is complete only now.
//
// Every file is written through the one publish primitive (durable: temp
// file, fsync, link, directory fsync; a conditional PUT on S3) under its own
// name, put-if-absent, then read back: its size and SHA-256 must equal what
// was read from the source, else COPY_VERIFY_FAILED names it. So a crash or
// a failure at any write leaves the destination absent (nothing published
// yet, at most empty directories), complete (the marker removed), or
// refused with CHECKPOINT_COPY_INCOMPLETE, whose remedy is to run the copy
// again: a destination holding the marker is cleared (Clearing) and copied
// afresh. The source is never written but for its lock.
//
// # Clearing
//
// The marker is the first file a copy writes and the last one its clear
// removes, so a kill anywhere in a clear leaves the destination either
// marked (refused, and the copy again clears the rest) or empty (absent):
//
//  1. the table destination: _last_checkpoint, the _delta_log files newest
//     version first, then the data files (the reverse of the copy: at
//     every step a shorter log over files it still has, or a log with a
//     gap that table readers refuse), each phase's directories synced
//     before the next phase;
//  2. every file of the checkpoint destination but the marker, temp files
//     included, in any order (the marker refuses them all), each directory
//     synced, then the directories left empty;
//  3. the marker, and the directory synced.
//
// Removing files one by one, in an order that keeps the marker, is what
// works on both stores: S3 has no rename of a prefix to publish a cleared
// tree in one step, and a local recursive remove (os.RemoveAll) goes in
// listing order, where commits/ sorts before copy-in-progress. Before
// this order (main at 27801e4), a kill in a clear left no marker over a
// checkpoint without commits/: a start re-ran its last batch from empty
// state, and the copy refused the destination as not empty.
//
// # Marker format (version 1)
//
//	<DST>/copy-in-progress
//
// One JSON object on one line:
//
//	{"version":1,"from":"<SRC>","table":"<table SRC>","tableTo":"<table DST>"}
//
// table and tableTo are "" without --table. An unknown version or a file
// that does not parse is CHECKPOINT_CORRUPT naming it.
//
// # The local state cache
//
// Not copied: the state's local Pebble cache (--local-dir, by default a
// directory derived from the checkpoint's path) is a copy of the
// checkpoint's state files. The first start on DST finds no cache for the
// new path and rebuilds it from the copied state files ("state cache
// rebuilt from checkpoint"). A cache passed explicitly with --local-dir is
// trusted only if its MARKER names exactly the checkpoint's committed state
// version (store id, version, attempt, counts: package state), which a
// copy keeps; anything else is rebuilt the same way.
package relocate
