// Package shape is the record of a streaming query's shape in its
// checkpoint: which sources it reads (by name, provider and location), its
// filter, projection, window, watermark, group keys, aggregates, output mode,
// output and state schemas, sink location and trigger. The engine compares
// the recorded shape with the shape of a restarted query and applies its
// restart rules (engine/restart_rules.go) before anything is written; this
// package only holds, encodes and reads the record.
//
// # On-disk format (versions 1 to 5)
//
//	<checkpoint>/shape/<seq>
//
// seq is 0, 1, 2, ... (decimal, no padding). shape/ is a checkpoint.Log
// (Codec, Log): a file is written once, through checkpoint.Publish (temp
// file, fsync, link, never overwritten), when a
// query starts on a new checkpoint or restarts with an allowed change; the
// newest seq is the shape in force. Each file is two lines:
//
//	v2
//	{"firstBatchId":N,"shape":{...}}
//
// Version 2 is version 1 plus the sink's identity, sink.id. A record whose
// sink has no identity (a sink without one, or a table not created yet) is
// written as v1, byte for byte what version 1 wrote; both versions read,
// and a v1 file with a sink id, or a v2 file without one, is corrupt.
//
// Version 3 records a plan's stateful operators as a list: it is written
// when the plan has more than one, or one with stateless steps of its own
// between the read path and it (a projection before an aggregation built
// with package flow). Its shape object has, besides the fields below,
//
//	operators     [{"id","kind","window","keys","aggregates","stateSchema",
//	              "input"}] in id order (0, 1, ...); kind "aggregate",
//	              "deduplicate", "sessionWindow", "globalLimit" (LIMIT in
//	              append mode: no keys, no aggregates) or "join" (which
//	              adds "joinType", and whose keys are its equi-join pairs
//	              "k=k2"); input the
//	              stateless steps before the operator, rendered
//
// and then its top-level window is null, keys and aggregates are [] and
// stateSchema is "": they describe operator 0 in versions 1 and 2 only,
// which therefore read as a plan of one aggregation, operator 0. A plan of
// one aggregation without input steps is still written as v1 or v2, byte
// for byte as before; a v1 or v2 file with operators, or a v3 file without
// or with a top-level aggregation, ids out of order or an unknown kind, is
// corrupt.
//
// Version 4 is version 3 plus a join's sides' watermarks: a join
// operator's "watermarks" [left, right], each {"column","delayUs"} or
// null for a side without one. It is written when a join records them,
// so that a binary that reads up to v3 refuses the record by its version
// instead of meeting a field it does not know; a v3 file with them is
// corrupt.
//
// Version 5 is version 4 (the sides' watermarks optional, as in v3) plus
// Spark's operator ids: a top-level
//
//	numbering     "preOrder"
//
// says the operators' ids are the ones Spark's IncrementalExecution gives
// them, in a pre-order (top-down) walk of the plan from the sink: the
// operator nearest the sink is 0 (a join followed by an aggregation: the
// aggregation 0, the join 1). The list is still in id order, so it runs
// from the sink towards the sources; each operator's input still names
// the steps before it in flow order. Versions 3 and 4 number in flow order
// (the source side's operator is 0), and a checkpoint they record keeps
// that numbering for its life: its state directories are named by it.
// Version 5 is written for a plan of two or more operators started on a
// checkpoint without such a v3 or v4 record (one operator has id 0 under
// either numbering, and is written as before); a v5 file with another
// numbering or fewer than two operators, or an older file with a
// numbering, is corrupt.
//
// Version 6 is version 5 plus an operator's side: an operator below a
// stream-stream join, on one of its inputs (a deduplication of one
// relation's rows, Spark's StreamingDeduplicateExec under the
// StreamingSymmetricHashJoinExec), has
//
//	side          "left" or "right"
//
// and an operator on the main chain has no such field. The ids are still
// Spark's pre-order ones: the operators after the join from the sink
// back, the join, the left side's operators from the join down, then the
// right side's (a join with a deduplication on each side and nothing
// after it: the join 0, the left deduplication 1, the right one 2). It
// is written when an operator has a side, and only then; its numbering is
// "preOrder", or absent for a query that started without recording its
// shape (flow order: the left side's operators, the right side's, the
// join, what follows). A v6 file without a side, or an older one with
// one, is corrupt.
//
// firstBatchId is the first batch the shape applies to (the batch a start
// runs first: the re-run of a pending batch, or the next new batch). The
// shape object has these fields, all always present:
//
//	sources       [{"name","provider","location","options"}] in query order;
//	              name "" for an unnamed (positional) source; provider is the
//	              --source FORMAT (s3archive, ethrpc); location the URI
//	              without its query string; options the query string (read
//	              limits and other options), "" if none
//	from          "blocks" (every source) or one source name
//	filter        canonical WHERE text, "" without a filter
//	projection    the SELECT list, canonical, in the order written
//	columns       the input columns read
//	window        {"column","size","slide"} (Spark interval strings; slide ""
//	              for tumbling) or null
//	watermark     {"column","delayUs"} or null
//	keys          group keys in GROUP BY order (without the window)
//	aggregates    "<func>(<col>|*) as <name>", in SELECT order
//	outputMode    update | append | complete
//	outputSchema  the operator's output schema (stream.Schema.String())
//	stateSchema   the aggregation's state schema (state.Schema.String())
//	sink          {"format","location"} and, in v2 only, "id": the identity of
//	              the output whatever its location (a Delta table's
//	              metadata id); the restart rules recognise the table by it
//	              (engine/restart_rules.go), not by location
//	trigger       available-now | once | processing-time=<duration>
//
// A file that does not parse, has another version line, or an unexpected
// name under shape/ (the log is strict) is CHECKPOINT_CORRUPT with its path,
// never ignored; temp files of an unfinished publish are skipped and
// deleted by the lock holder (RemoveTemps). Records are never purged.
package shape
