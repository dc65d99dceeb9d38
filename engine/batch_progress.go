package engine

import (
	"time"

	"github.com/ethstream/ethstream/stream"
)

// A batch's progress event (Spark's StreamingQueryProgress), built by the
// driver's emit-progress step from the recorder's books (recorder.go).

// sourceProgress is each range's sources[] entry, taken after the reads (a
// reporting source's latest offset and metrics are those of this batch).
func (d *driver) sourceProgress(b *batchRun) []stream.SourceProgress {
	sp := make([]stream.SourceProgress, 0, len(b.p.Ranges))
	for i, r := range b.p.Ranges {
		st := d.byKey[r.Key]
		p := stream.SourceProgress{Description: st.src.Description(), Name: strPtr(st.name),
			StartOffset: r.Start, EndOffset: r.End, LatestOffset: r.End, NumInputRows: b.rec.in.rows[i]}
		if rs, ok := st.src.(stream.ReportingSource); ok {
			p.LatestOffset = rs.ReportLatestOffset()
			p.Metrics = rs.Metrics()
		}
		sp = append(sp, p)
	}
	return sp
}

// dataProgress is a data or no-data batch's event at end.
func (d *driver) dataProgress(b *batchRun, end time.Time) *stream.Progress {
	rec := b.rec
	trigger, in := rec.trigger, &rec.in
	p := d.progress(b.p.ID, trigger, end, rec.durations(end), in.total)
	// One entry per stateful operator, in id order (Spark's): entry i is
	// operator i, wherever it is in the flow.
	p.StateOperators = make([]stream.OperatorProgress, len(rec.seen.ops))
	for i, opProg := range rec.seen.ops {
		if opProg.NumShufflePartitions == 0 {
			opProg.NumShufflePartitions = int64(b.p.Partitions)
		}
		p.StateOperators[d.ops[i].id] = opProg
	}
	p.Sources = rec.seen.sources
	for i := range p.Sources {
		p.Sources[i].InputRowsPerSecond = inputRate(p.Sources[i].NumInputRows, d.lastTrigger, trigger)
		p.Sources[i].ProcessedRowsPerSecond = rate(p.Sources[i].NumInputRows, end.Sub(trigger))
	}
	p.InputRowsPerSecond = inputRate(in.total, d.lastTrigger, trigger)
	p.ProcessedRowsPerSecond = rate(in.total, end.Sub(trigger))
	p.EventTime = map[string]string{}
	if in.ev.n > 0 {
		p.EventTime["min"] = isoTime(in.ev.min / 1000)
		p.EventTime["max"] = isoTime(in.ev.max / 1000)
		p.EventTime["avg"] = isoTime(int64(in.ev.sumMs / float64(in.ev.n)))
	}
	if d.q.Watermark != nil || d.q.hasSideWatermark() {
		p.EventTime["watermark"] = isoTime(b.p.Entry.Metadata.BatchWatermarkMs)
	}
	p.Sink = rec.seen.sink
	if p.Sink.Description == "" {
		p.Sink.Description = d.sink.Description()
	}
	return p
}

// controlProgress is a REPARTITION control batch's event at end.
func (d *driver) controlProgress(b *batchRun, end time.Time) *stream.Progress {
	from, to := b.p.From, b.p.To
	p := d.progress(b.p.ID, b.rec.trigger, end, b.rec.durations(end), 0)
	// One entry per operator the control batch repartitioned, in id order.
	for _, stats := range b.res.Repartition {
		p.StateOperators = append(p.StateOperators, stream.OperatorProgress{
			OperatorName: "repartition", NumRowsTotal: stats.KeysAfter, NumShufflePartitions: int64(to),
			NumStateStoreInstances: int64(to),
			CustomMetrics: map[string]int64{"keysBefore": stats.KeysBefore, "keysAfter": stats.KeysAfter,
				"partitionsBefore": int64(from), "bytesRead": stats.BytesRead, "bytesWritten": stats.BytesWritten},
		})
	}
	for _, r := range b.p.Ranges {
		st := d.byKey[r.Key]
		desc, name := "", strPtr(r.Key)
		if st != nil {
			desc, name = st.src.Description(), strPtr(st.name)
		}
		p.Sources = append(p.Sources, stream.SourceProgress{Description: desc, Name: name,
			StartOffset: r.End, EndOffset: r.End, LatestOffset: r.End})
	}
	if d.q.Watermark != nil {
		p.EventTime = map[string]string{"watermark": isoTime(b.p.Entry.Metadata.BatchWatermarkMs)}
	}
	p.Sink = stream.SinkProgress{Description: d.sink.Description(), NumOutputRows: 0}
	return p
}

func (d *driver) progress(id int64, trigger, end time.Time, dur map[string]int64, rows int64) *stream.Progress {
	return &stream.Progress{
		ID: d.queryID, RunID: d.runID, Name: strPtr(d.q.Name), Timestamp: isoTime(trigger.UnixMilli()),
		BatchID: id, BatchDuration: end.Sub(trigger).Milliseconds(), NumInputRows: rows, DurationMs: dur,
		StateOperators: []stream.OperatorProgress{}, Sources: []stream.SourceProgress{},
	}
}

func inputRate(n int64, last, now time.Time) *float64 {
	if last.IsZero() {
		return nil
	}
	return rate(n, now.Sub(last))
}
