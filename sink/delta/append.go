package delta

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/google/uuid"
)

// The streaming paths of Spark's DeltaSink (docs/contracts.md, Delta
// table): in output mode append (and for a query with no stateful operator,
// stream.SinkEnv.Append) each batch's rows are appended as new data files;
// in output mode complete they replace the whole table: the commit removes
// every live file and adds the batch's (DeltaSink's
// txn.filterFiles().map(_.remove) under OutputMode.Complete). Either way
// one commit per batch, operation STREAMING UPDATE with outputMode, queryId
// and epochId, and the batch's txn {appId: query id, version: batch id}; as
// for the MERGE, a batch whose id is not above the table's txn version for
// the query is skipped, so a re-run after a crash writes nothing twice.

// commitStreaming commits rows as batch batchID in mode (modeAppend or
// modeComplete). The data files are written once and committed at the
// first free version: a lost race re-reads the log and retries the commit
// alone (an append reads nothing of the table; a complete batch removes the
// live files of the fresher snapshot, which the batch's rows do not depend
// on).
func (m *MergeSink) commitStreaming(ctx context.Context, batchID int64, rows *rowSet, mode writeMode) (batchResult, error) {
	if mode == modeComplete {
		rows = completeRows(rows)
	} else if rows.del != nil {
		return batchResult{}, errcode.New(CodeBadBatch, m.o.Path, "aggregate the rows (an operator undoes a retraction)",
			"batch %d retracts rows, and an append cannot take a row back", batchID)
	}
	s := m.snap
	if _, err := s.refresh(ctx); err != nil {
		return batchResult{}, err
	}
	if v, ok := s.Txn(m.queryID); ok && v >= batchID {
		return batchResult{version: s.Version, skipped: true, attempts: 1}, nil
	}
	start := time.Now()
	plan := &mergePlan{fs: s.table.fs}
	if rows.n > 0 {
		adds, err := s.table.writeChunks(ctx, chunkRows(rows, m.o.TargetFileRows), m.o.Clock())
		for _, a := range adds {
			plan.written = append(plan.written, s.table.filePath(a.Path))
			plan.adds = append(plan.adds, action{Add: a})
			plan.metrics.NumTargetFilesAdded++
			plan.metrics.NumTargetBytesAdded += a.Size
		}
		if err != nil {
			plan.abandon()
			return batchResult{}, err
		}
	}
	plan.metrics.NumOutputRows = int64(rows.n)
	plan.metrics.ExecutionTimeMs = ceilMs(time.Since(start))
	for attempt := 1; attempt <= maxCommitAttempts; attempt++ {
		if attempt > 1 {
			if _, err := s.refresh(ctx); err != nil {
				plan.abandon()
				return batchResult{}, err
			}
		}
		if err := checkWriteProtocol(s.Protocol, m.table.logDir); err != nil {
			plan.abandon()
			return batchResult{}, err
		}
		if v, ok := s.Txn(m.queryID); ok && v >= batchID {
			plan.abandon()
			return batchResult{version: s.Version, skipped: true, attempts: attempt}, nil
		}
		var removes []action
		metrics := plan.metrics
		if mode == modeComplete {
			if s.Metadata.Configuration["delta.appendOnly"] == "true" {
				plan.abandon()
				return batchResult{}, errcode.New(CodeUnsupportedFeature, m.table.root, "unset delta.appendOnly, or write in output mode append or update",
					"table is append-only but output mode complete removes every file of the table each batch")
			}
			removes = removeAll(s, m.o.Clock().UnixMilli(), &metrics)
		} else if err := m.checkLiveFiles(s); err != nil {
			plan.abandon()
			return batchResult{}, err
		}
		readVersion := s.Version
		ts := m.o.Clock().UnixMilli()
		// Spark's isBlindAppend: true when the commit only adds files and
		// read none of the table (complete mode read the file list).
		blind := mode == modeAppend
		acts := []action{{CommitInfo: &CommitInfo{
			Timestamp: ts, Operation: "STREAMING UPDATE",
			OperationParameters: map[string]any{"outputMode": mode.sparkName(), "queryId": m.queryID, "epochId": strconv.FormatInt(batchID, 10)},
			ReadVersion:         &readVersion, IsolationLevel: "Serializable", IsBlindAppend: &blind,
			OperationMetrics: map[string]any{"numAddedFiles": strconv.FormatInt(metrics.NumTargetFilesAdded, 10),
				"numOutputRows": strconv.Itoa(rows.n), "numOutputBytes": strconv.FormatInt(metrics.NumTargetBytesAdded, 10),
				"numRemovedFiles": strconv.FormatInt(metrics.NumTargetFilesRemoved, 10)},
			EngineInfo: engineInfo(), TxnID: uuid.NewString(),
		}}, {Txn: &Txn{AppID: m.queryID, Version: batchID, LastUpdated: &ts}}}
		acts = append(acts, plan.adds...)
		acts = append(acts, removes...)
		err := s.commitActions(acts, plan.written...)
		if errors.Is(err, errVersionTaken) {
			m.log.Info("delta commit lost the race; retrying", "version", readVersion+1, "batch", batchID, "attempt", attempt)
			continue
		}
		if err != nil {
			if !errors.Is(err, errCommitUncertain) {
				plan.abandon()
			}
			return batchResult{}, err
		}
		if s.Version%CheckpointInterval == 0 {
			m.checkpointLater(s)
		}
		return batchResult{version: s.Version, attempts: attempt, metrics: metrics}, nil
	}
	plan.abandon()
	return batchResult{}, errcode.New(CodeCommitConflict, m.table.logDir, "stop the other writers of this table and re-run",
		"batch %d lost the commit race %d times", batchID, maxCommitAttempts)
}

// completeRows is a complete-mode batch as the table's new content: one row
// per key (the last), sorted by key, without the rows of groups a
// retraction emptied (sign -1), which the table no longer holds.
func completeRows(rows *rowSet) *rowSet {
	rows = rows.dedupeSorted()
	if rows.del == nil {
		return rows
	}
	keep := make([]int, 0, rows.n)
	for i := range rows.n {
		if !rows.deleted(i) {
			keep = append(keep, i)
		}
	}
	out := rows.take(keep)
	out.del = nil
	return out
}

// removeAll removes every live file of s (AddFile.remove in Delta: the
// add's path, partition values, size and stats, dataChange true), counting
// them in metrics.
func removeAll(s *Snapshot, now int64, metrics *MergeMetrics) []action {
	files := s.Files()
	out := make([]action, 0, len(files))
	for _, f := range files {
		size := f.Size
		out = append(out, action{Remove: &RemoveFile{
			Path: f.Path, DeletionTimestamp: &now, DataChange: true, ExtendedFileMetadata: ptr(true),
			PartitionValues: nonNilPV(f.PartitionValues), Size: &size, Stats: f.Stats,
		}})
		metrics.NumTargetFilesRemoved++
		metrics.NumTargetBytesRemoved += f.Size
	}
	return out
}
