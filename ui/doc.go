// Package ui is ethstream's live dashboard: the Structured Streaming tab of
// Spark's UI for one query, plus what that tab never shows (rows per source
// by name, tombstones, control batches, the offset log as it is on disk, the
// demo's lifecycle). It serves `ethstream run --ui-addr`, `ethstream demo
// --ui-addr` and `ethstream ui --checkpoint DIR`.
//
// # Where the data comes from
//
// A Dashboard only reads the checkpoint (package checkpoint's Dir): it tails
// the checkpoint's progress log (<ckpt>/progress/ segments, after a
// progress.jsonl of format 1) and re-reads offsets/ and commits/ on every poke
// (engine.Listener: a batch committed in this process) and every poll
// (DefaultPoll). The same code therefore follows a query in this process, in
// child processes (the demo starts each phase as its own `ethstream run`) and
// a checkpoint finished long ago. What the checkpoint does not record comes
// from the command: the trigger and the status (active, stopped, failed with
// its error code) from `run`; phases and verification lines from the demo
// (DemoObserver; cmd/ethstream adapts demo.Observer to it, so ui does not
// import demo). `ethstream ui` shows
// "stopped" until new batches arrive, then "active".
//
// A progress line without its final "\n" is being appended and is read on
// the next pass; an unreadable line inside the file (a crash mid-append) is
// skipped and reported in the header. A file that shrinks, or a query id that
// changes, starts a new history (the demo recreates its checkpoint). A
// corrupt offsets entry is shown with its path (OffsetLog.Error), never
// skipped silently.
//
// # Charts
//
// Charts are inline SVG drawn in the browser by static/app.js (our own code,
// no library) from the batch points, instead of images rendered in Go:
// they follow the page's width (1280 px or a phone) with text at its real
// size, update per batch without re-rendering images on the server, and can
// be read without sight — each chart is focusable, ← → Home End read one batch
// at a time into a live region, and every chart has its values as a table.
// Colours are Okabe-Ito and always paired with a dash pattern, a marker shape
// or a text label. Every axis names its unit; the x axis is the batch id, one
// mark group per batch (g.batch[data-batch-id]). Restarts (a new run id) and
// control batches are drawn as labelled vertical markers on every chart.
//
// # HTTP API, version 1 (APIVersion)
//
//	GET /              the page (static/, embedded in the binary)
//	GET /api/state     State as JSON: {"v":1,"query":…,"batches":[…],"sources":[…],"offsetLog":…,"demo":…|null}
//	GET /api/events    server-sent events, below
//	GET /api/batch/N   {"kind":"data|no-data|repartition","progress":…}: batch N's whole
//	                   progress event (sources with their offsets and metrics,
//	                   durationMs, stateOperators, sink), for
//	                   the per-batch page; 404 for a batch not seen, or older than the
//	                   newest 2000 the dashboard keeps
//
// Field names are the json tags of State and the types it holds; numbers are
// plain JSON numbers (durations in ms, memory in bytes, rates in rows/s),
// times RFC 3339 strings in UTC, offsets their compact JSON text ("-" in a
// log entry line for no offset yet, "null" in progress). Fields are only ever
// added.
//
// The event stream sends, in order:
//
//	event: snapshot   data: State         first, and again whenever the client must start over
//	event: batch      data: Batch         each new batch, in order
//	event: meta       data: Meta          header, sources, offset log and demo, when any changed
//	event: end        data: {}            the command is ending; the stream closes
//
// plus a ": ping" comment every 15 s when idle. A client keeps the snapshot
// and appends batches; a reconnecting client (EventSource does so by itself)
// gets a new snapshot. Each stream holds only its position, so a slow
// client delays nobody.
package ui
