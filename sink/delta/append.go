package delta

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/google/uuid"
)

// The append path: a query with no stateful operator (stream.SinkEnv.Append)
// appends each batch's rows as new data files, in one commit with the
// batch's txn, as Spark's DeltaSink does in outputMode append (operation
// STREAMING UPDATE, isBlindAppend true). As for the MERGE, a batch whose id
// is not above the table's txn version for the query is skipped, so a
// re-run after a crash writes nothing twice.

// commitAppend commits rows as batch batchID: the data files are written
// once and committed at the first free version (a lost race retries the
// commit alone: an append reads nothing of the table).
func (m *MergeSink) commitAppend(ctx context.Context, batchID int64, rows *rowSet) (batchResult, error) {
	if rows.del != nil {
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
		if err := m.checkLiveFiles(s); err != nil {
			plan.abandon()
			return batchResult{}, err
		}
		readVersion := s.Version
		ts := m.o.Clock().UnixMilli()
		blind := true
		acts := []action{{CommitInfo: &CommitInfo{
			Timestamp: ts, Operation: "STREAMING UPDATE",
			OperationParameters: map[string]any{"outputMode": "Append", "queryId": m.queryID, "epochId": strconv.FormatInt(batchID, 10)},
			ReadVersion:         &readVersion, IsolationLevel: "Serializable", IsBlindAppend: &blind,
			OperationMetrics: map[string]any{"numAddedFiles": strconv.FormatInt(plan.metrics.NumTargetFilesAdded, 10),
				"numOutputRows": strconv.Itoa(rows.n), "numOutputBytes": strconv.FormatInt(plan.metrics.NumTargetBytesAdded, 10),
				"numRemovedFiles": "0"},
			EngineInfo: engineInfo(), TxnID: uuid.NewString(),
		}}, {Txn: &Txn{AppID: m.queryID, Version: batchID, LastUpdated: &ts}}}
		acts = append(acts, plan.adds...)
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
		return batchResult{version: s.Version, attempts: attempt, metrics: plan.metrics}, nil
	}
	plan.abandon()
	return batchResult{}, errcode.New(CodeCommitConflict, m.table.logDir, "stop the other writers of this table and re-run",
		"batch %d lost the commit race %d times", batchID, maxCommitAttempts)
}
