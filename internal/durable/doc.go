// Package durable is the one way ethstream publishes a file that must survive
// a crash: checkpoint entries, state versions, Delta commits, checkpoints and
// data files, archive files, results and progress files all go through
// Publisher.Publish.
//
// # Guarantees
//
// Publish(dir, name, opts, write) streams write's bytes to a temporary file
// in dir, fsyncs and closes it, then makes it visible under name and fsyncs
// dir (unless Options.NoDirSync). Whatever happens (an error from any file
// operation, or a crash at any point), a reader of dir/name sees either no
// file (or, with Replace, the previous file) or the complete new file, never
// a partial one. When Publish returns nil the file is durable: its bytes and
// its directory entry survive a crash (with NoDirSync, the entry is durable
// once the caller has synced dir with SyncDir).
//
// The content is streamed through a fixed buffer, so a file of any size
// costs constant memory. The buffer is copied into, never bypassed, so a
// vfs.File that modifies what it is given never touches the caller's memory.
//
// # Modes
//
//   - NoOverwrite (the zero Mode): put-if-absent. The temp file is hard-linked
//     (link(2)) to name, which fails if name exists, so of two writers racing
//     for one name exactly one wins and the other gets ErrExists. A name that
//     already exists before the write starts is ErrExists without writing.
//     Used for every file that is written once: checkpoint metadata, offsets
//     and commits entries, a source's log files, state versions, Delta
//     commits and data files.
//   - Replace: the temp file is renamed (rename(2)) over name, atomically
//     replacing any previous file. Used for derived files that may be
//     rewritten with the same or newer content (Delta checkpoints and
//     _last_checkpoint, results files, archive files regenerated from a seed,
//     the state cache marker).
//
// An object store implements the same interface: NoOverwrite is a PUT with
// "If-None-Match: *" (412 Precondition Failed is ErrExists) and Replace a
// plain PUT; both are atomic there, so no temp object is needed. Writers get
// their Publisher from For(fs), which returns fs itself when the FS
// implements Publisher, and Local (the temp file protocol) otherwise.
//
// # Temp files
//
// The temp file is named
//
//	.<name>.<16 hex digits>.tmp
//
// in dir: hidden (readers that list dir skip names starting with "." or
// ending in ".tmp"), unique per call (two writers never share a temp file),
// and recognisable by IsTemp, so the next writer that owns dir deletes the
// ones a crash left (RemoveTemps). After a successful publish the temp name
// is removed; if that removal fails the publish still succeeds (the file is
// published) and Result.Temp names the leftover for a later removal. On a
// failed publish the temp file is removed when possible; Result.Temp names it
// when it could not be. An error with Result.Visible set means the name was
// published but the directory fsync failed: readers may see the file, it is
// only not known to survive a crash.
//
// # Anonymous temp files
//
// On the local disk (vfs.Default, on Linux) a publish does not create its
// temp file: it writes into an anonymous file (open(2) with O_TMPFILE) that
// a background goroutine opened ahead of time, links it (linkat(2)) to the
// temp name above, and goes on as with a created one. Creating a file is
// the costly step of a small publish (anon_linux.go says why), so the
// creation leaves the writer's path; the guarantees, the modes and the
// order of fsyncs are unchanged, and a crash before the temp name's link
// leaves no entry at all (the kernel frees an unlinked inode). A pool of up
// to 8 open files is kept per file system, refilled after each publish in
// the directory published to last; the first publish to a file system, one
// whose pool is empty, and any other FS (errorfs, an in-memory FS) create
// the temp file. A file system that refuses O_TMPFILE is never asked again.
//
// # Directories
//
// SyncDir fsyncs a directory (making the names created in it durable);
// EnsureDir creates a directory and fsyncs the parent of every directory it
// created, so a crash cannot lose a directory together with the files
// published in it.
package durable
