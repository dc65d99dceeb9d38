// Package deltalog reads a Delta table's log: the actions of its commits
// and classic checkpoints (the protocol's JSON and Parquet forms), the
// table schema, and the replay of both into the snapshot at a version. It
// is the layer both the Delta sink (sink/delta, which writes the log) and
// the Delta source (sources/deltasource, which streams it) stand on, so
// that neither imports the other. It writes nothing.
//
// The formats are Delta's (PROTOCOL.md): commit N is _delta_log/N.json
// (20 digits), one JSON action a line; a classic checkpoint is
// _delta_log/N.checkpoint.parquet, one action a row. The codes of its
// errors are sink/delta's (DELTA_CORRUPT_LOG, DELTA_VERSION_GAP, ...),
// which re-exports them.
package deltalog
