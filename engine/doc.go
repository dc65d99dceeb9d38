// Package engine is ethstream's micro-batch streaming engine: planning,
// triggers, restart and recovery, source evolution rules, progress events and
// listeners (docs/contracts.md: Reference query through Progress records).
//
// The contracts it drives are in package stream: Source (sources/s3archive,
// sources/ethrpc), Operator (agg over state), Sink (sink/delta), all
// exchanging columnar Batches. The checkpoint's files are in package
// checkpoint (its doc lists every artifact) and, for the recorded query
// shape (<ckpt>/shape/), package shape; this package writes them only
// through those two (state/ and sources/<key>/ through the operator and
// the sources).
//
// # Structure
//
// A pure core and a thin driver, in the manner of etcd's raft (Ready /
// Advance). One concept per file:
//
//   - evolution.go: planStart takes an immutable checkpoint.Snapshot, the
//     query's source names and the session confs and returns a startPlan:
//     the pending batch to re-run, the sources resumed / added / to
//     tombstone, the pinned confs, a repartition to run, or the coded error
//     that refuses the start. It performs no I/O, so every refusal happens
//     before anything is written or any source is opened, and a refused
//     start leaves the checkpoint byte-identical.
//   - settings.go and validate.go: the one validation of a start, shared by
//     Run, Plan and RepartitionOffline. ValidateConf parses the session confs
//     (pure; an unknown key is a warning naming the closest known one);
//     checkStart adds the source names, the checkpoint read without a lock,
//     the start plan, the state partition counts against what the operator
//     can hold (stream.PartitionLimiter) and a read-only probe of every
//     source and the sink (stream.Checker); checkRepartition is its offline
//     counterpart. All of it runs before Lock creates the directory and
//     .lock, so a refused first start creates nothing.
//   - restart_rules.go: decideShape compares the shape recorded in
//     <ckpt>/shape/ (package shape) with the starting query's and applies
//     the restart rules, as part of checkStart (before anything is
//     written); open.go records a new or allowed changed shape as
//     shape/<seq> once the checkpoint is locked.
//   - planner.go: the per-batch planner. recoveryPlan gives the batches a
//     start runs before new ones (the pending batch, then a requested
//     control batch); planNext decides each trigger from a batchView (the
//     loop state, each source's latest offset, the operator's no-data
//     answer, all passed in as values) and, when it lacks one of these, says
//     which (needLatest, needProbe) instead of fetching it. A decision is a
//     batchPlan: the offsets entry and its steps (write or re-use offsets/N,
//     purge, read a range per source into the operator, finish, write the
//     sink, commit state or repartition it, write commits/N, commit the
//     sources, emit progress), each carrying its phase (wal, add-batch,
//     repartition, commit, report): a phase ends where the next step's
//     differs. advance is the loop state after a commit.
//   - repartition.go: the REPARTITION control batch, once: its decisions
//     (redoRepartition, newRepartition, pendingRepartition), its plan
//     (controlPlan) and the offline procedure (planOffline,
//     RepartitionOffline) that runs it through the same driver.
//   - driver.go: performs a plan's steps against the checkpoint, sources,
//     operator and sink, and reports the rows and the commit watermark back.
//     It decides nothing. open.go opens and closes what it uses.
//   - readahead.go: under availableNow, batch N+1's input read into
//     bounded memory while batch N finishes, writes its sink and commits;
//     the next trigger plans over the range read (nothing durable moves).
//   - recorder.go: the progress recorder beside the driver (Spark's
//     ProgressReporter): it times the phases the steps name and keeps what
//     the steps saw (rows, event times, the operator's, sink's and
//     sources' progress), each value computed once per batch;
//     batch_progress.go builds the one progress event from it, and the
//     driver encodes it once for the progress log and every listener.
//   - sides.go: two-input queries (a join): Query.Sides, each a set of
//     named sources with its own read path and watermark, handed to
//     operator 0 (a stream.SideOperator) by side; the sides' watermarks
//     tracked in memory and combined by the policy pinned in the offsets
//     conf, as Spark's WatermarkTracker. sidechain.go: a side's own
//     operators before the join (Side.Stages, a deduplication of one
//     relation's rows): the plan is then a tree, numbered by Spark's
//     pre-order walk, each side's chain feeding the join at the finish.
//   - run.go: Run, the trigger loop: obtain what planNext asks for, have the
//     driver perform the plan, advance. plan.go: Plan, Run's dry run through
//     the same planner and driver with I/O switched off (`ethstream plan`).
//
// # Batch lifecycle
//
// For batch N: offsets/N is written (walCommit; alongside the reads, see
// Crash order) and entries older than minBatchesToRetain are purged; each
// source's rows in (start, end] are read with ReadBatch (the literal "source" column is added when the query reads
// it) and handed to Operator.Process with the batch's watermark; then, for
// an operator that implements stream.WatermarkLookahead, NextWatermark with
// the commit watermark (known once the input is read), Operator.Finish,
// Sink.AddBatch(N) and Operator.Commit(N), commits/N with
// nextBatchWatermarkMs = max(batch watermark, max event time - delay),
// Source.Commit(end), and the progress event (appended to the
// checkpoint's progress log, <ckpt>/progress/, then given to the
// listeners). A failure anywhere
// aborts the operator's batch and leaves N pending, and the next start
// re-runs N from state version N-1 (the last committed batch).
//
// # Crash order
//
// The order needs offsets/N durable before anything of batch N is visible,
// and commits/N after both the sink's batch N and state version N are
// durable; it does not need either of those two before the other: a re-run
// finds the sink's batch N written (its txn) and writes nothing twice, and
// writes state version N again under a new attempt, whose metadata wins
// over any earlier attempt's (a state version without its commits/N is
// never loaded: Open loads the last committed batch's). The driver
// overlaps what that order allows:
//
//  1. offsets/N is written on its own goroutine while the sources are read
//     into the operator (only memory changes), and awaited before Finish:
//     its fsyncs leave the critical path of a short live batch. The crash
//     point after-offsets follows the await.
//  2. Operator.Finish(N).
//  3. With an operator that implements stream.CommitPreparer (agg),
//     PrepareCommit(N) then Commit(N) run on their own goroutine while
//     Sink.AddBatch(N) runs on the driver's: the state store publishes
//     version N's data file, then its metadata file, and applies the batch
//     to its local cache. The sink's files are disjoint from the state's,
//     so any interleaving of the two writers' files is a state a crash
//     could also leave: the table with or without batch N, and state
//     version N unpublished, prepared or published. The driver waits for
//     both; if either failed, the batch fails (a sink failure cancels the
//     state's context, so a commit not yet published stays unpublished)
//     and Abort drops what is left (a prepared data file is collected like
//     any crash leftover: the next commit of N writes a new attempt, and
//     garbage collection removes attempts without metadata). Without
//     CommitPreparer, Commit(N) runs after the sink.
//  4. commits/N is written from Finish on: its content (the commit
//     watermark) is known then, so its temp file is written and fsynced on
//     its own goroutine alongside step 3 (or the sink write and Commit in
//     turn), and held there (commit_ahead.go). Only once both returned and
//     the crash point after-state-commit passed is it published (linked to
//     commits/N, the directory fsynced); a batch that fails first drops it
//     (its temp file removed, or left by a crash for the next start's
//     RemoveTemps). The commit phase shrinks to the link and one directory
//     fsync.
//  5. The sources' commits and the progress event.
//
// Crash points (the test hooks) are after-offsets, before-sink, after-sink
// (without CommitPreparer), after-state-commit (after the overlapped sink
// write, or after Commit) and after-commit; the pipeline's fault loops
// crash at every write, at every pair of the sink's and the state's writes
// inside the overlap, and at every write of commits/N alone and crossed
// with each sink and state write that follows it
// (TestFaultLoopCrashDuringOverlap), which also checks that commits/N is
// linked only after every write of state version N and of the sink's Delta
// commit. The gain is the state commit's time the sink write covers,
// two fsyncs of its metadata file among them; the commit and the sink's
// file encoding compete for the same cores, so on a busy machine the
// saving is smaller than the commit time.
//
// A no-data batch (no source moved) is planned only if
// spark.sql.streaming.noDataMicroBatches.enabled, the watermark moved past
// the last batch's, and some operator whose input watermark moved past the
// one it ran the last batch with answers Operator.NeedsNoDataBatch true at
// its new one (Spark's MicroBatchExecution.constructNextBatch asking each
// StateStoreWriter's shouldRunAnotherBatch); the driver asks only then,
// and an error from an operator fails the run.
//
// # Restart
//
// With L the latest offsets id and C the latest commit id: C == L plans L+1;
// C < L re-runs L first with exactly its recorded offsets, timestamp and
// watermark (a source it needs but the query lacks is
// PENDING_BATCH_SOURCE_MISSING). Pinned confs (checkpoint.PinnedConfs) come
// from the checkpoint; spark.sql.shuffle.partitions is the state partition
// count and a different session value is ignored with a warning. The query id
// comes from metadata; each start gets a new run id.
//
// # Source evolution
//
// Without evolution sources are keyed by position (V1, or V2 if
// offsetLog.formatVersion=2) and their count is fixed. With evolution (V2)
// they are keyed by name: reordering is free, a new name starts from its
// configured start (SourceEnv.Committed == nil), a removed name is tombstoned
// in the next offsets entry with removedInBatch and lastOffset and carried
// forward in every later entry, and reusing a tombstoned name is refused.
//
// # Repartition
//
// When spark.sql.streaming.stateStore.partitions differs from the
// checkpoint's count, after any pending batch the engine runs control batch
// R: offsets/R copies the newest entry with controlBatchInfo REPARTITION
// {from, to} and the new count in conf (then the purge, as for any batch),
// Operator.Repartition(R-1, R, n), commits/R (the watermark unchanged) last,
// and a progress event with durationMs["controlBatch.REPARTITION"]. An
// unfinished R is redone on the next start unless a different count is
// requested (STREAMING_UNRESUMABLE_CONTROL_BATCH_DETECTED.REPARTITION).
// RepartitionOffline runs the same plan through the same driver for a
// stopped query, without the progress event; a count that already matches
// writes nothing.
//
// # Triggers
//
// AvailableNow calls PrepareAvailableNow on sources that implement it and
// runs batches until none is planned (the final no-data batch included).
// Once recovers, then runs at most one batch. ProcessingTime runs a batch per
// interval, never overlapping, skipping idle triggers, until the context
// ends. RealTime plans the next batch at once after a batch and, when idle,
// waits for a stream.DataNotifier source's signal or its fallback poll
// (Trigger.Interval, default DefaultRealTimePoll): a micro-batch per new
// head, not Spark 4's long-running real-time batches. Under any trigger the run also stops once Query.MaxDataBatches data
// batches committed in it (0 = no limit). A cancelled
// context between batches ends the run cleanly; inside a batch the batch is
// abandoned and re-run by the next start.
package engine
