package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
	"github.com/google/uuid"
)

// Opening and closing what a validated start uses: the checkpoint's
// directories and metadata, the sink, the operator and the sources.

// open writes what a validated start writes (directories, metadata) and
// opens the sink, the operator and the sources.
func (d *driver) open(ctx context.Context, sp *startPlan) error {
	if err := d.w.Prepare(); err != nil {
		return err
	}
	if err := shape.RemoveTemps(d.o.FS, d.w.Path); err != nil {
		return err
	}
	d.queryID = sp.QueryID
	if d.queryID == "" {
		d.queryID = uuid.NewString()
		if err := d.w.WriteMetadata(checkpoint.Metadata{ID: d.queryID}); err != nil {
			return fmt.Errorf("write query metadata: %w", err)
		}
	}
	q := d.q
	proj, withSrc := queryColumns(q.Columns)
	if wmk := q.Watermark; wmk != nil && !contains(proj, wmk.Column) {
		proj = append(proj, wmk.Column)
	}
	d.withSrc = withSrc
	d.rp = readPath{where: q.Where, pre: q.PreWatermark, sel: q.selected()}
	if q.Watermark != nil {
		d.rp.eventTime = q.Watermark.Column
	}
	d.sides = openSides(q)
	d.sideMarks = nil
	d.policy = watermarkPolicy(sp.Conf)
	sideOf := q.sideOf()
	d.byKey = map[string]*srcState{}
	d.order = d.order[:0]
	for i, ns := range q.Sources {
		st := &srcState{name: ns.Name, key: sp.Keys[i], src: ns.Source, side: -1}
		if sd, ok := sideOf[ns.Name]; ok && len(d.sides) > 0 {
			st.side = sd
		}
		d.order = append(d.order, st)
		d.byKey[st.key] = st
	}
	senv := stream.SinkEnv{QueryID: d.queryID, Locked: true} // open runs under the lock
	if schema, ok, err := d.outputSchema(); err != nil {
		return fmt.Errorf("the plan's output schema: %w", err)
	} else if ok {
		senv.Schema = schema
	}
	senv.Append = appendsRows(d.ops)
	if err := d.sink.Open(ctx, senv); err != nil {
		return fmt.Errorf("open sink %s: %w", d.sink.Description(), err)
	}
	d.sinkOpen = true
	env := stream.OperatorEnv{FS: d.o.FS, LocalDir: d.o.LocalDir, LocalFS: d.o.LocalFS,
		Partitions: sp.Partitions, Version: sp.CommittedID, Logger: d.o.Logger}
	if err := d.openOps(ctx, env); err != nil {
		return err
	}
	d.widenSides()
	for _, st := range d.order {
		dir, err := d.w.SourceDir(st.key)
		if err != nil {
			return err
		}
		cols := proj
		if st.side >= 0 {
			cols = d.sides[st.side].proj
		}
		senv := stream.SourceEnv{Name: st.name, MetadataDir: dir, FS: d.o.FS, Columns: cols,
			Committed: sp.Committed[st.key], MinBatchesToRetain: d.minRetain, Clock: d.o.Clock, Logger: d.o.Logger.With("source", st.key)}
		if err := st.src.Open(ctx, senv); err != nil {
			return fmt.Errorf("open source %q (%s): %w", st.key, st.src.Description(), err)
		}
		st.open = true
	}
	// The shape is recorded last: a start that fails to open its sink or
	// operator leaves no record of a shape that never ran.
	if sd := d.shape; sd != nil {
		if err := identifySink(ctx, sd, d.sink); err != nil {
			return fmt.Errorf("read the identity of sink %s: %w", d.sink.Description(), err)
		}
	}
	if sd := d.shape; sd != nil && sd.Write {
		if err := shape.Write(d.o.FS, d.w.Path, sd.Seq, shape.Record{FirstBatchID: sd.FirstBatchID, Shape: sd.Shape}); err != nil {
			return fmt.Errorf("record the query shape: %w", err)
		}
	}
	return nil
}

// close releases what open opened.
func (d *driver) close() error {
	// The read-ahead's producer reads the sources: it ends first.
	errs := []error{d.discardAhead()}
	d.aheadFree = nil
	for _, st := range d.order {
		if st.open {
			errs = append(errs, st.src.Close())
		}
	}
	errs = append(errs, d.closeOps()...)
	if d.sinkOpen {
		errs = append(errs, d.sink.Close())
	}
	return errors.Join(errs...)
}

// prepareAvailableNow fixes each source's end for the availableNow trigger.
func (d *driver) prepareAvailableNow(ctx context.Context) error {
	for _, st := range d.order {
		if an, ok := st.src.(stream.AvailableNowSource); ok {
			if err := an.PrepareAvailableNow(ctx); err != nil {
				return fmt.Errorf("prepare source %q for availableNow: %w", st.key, err)
			}
		}
	}
	return nil
}

// latestOffsets polls every source (keys in query order) for its latest
// offset after current, compacted so that the planner compares bytes.
func (d *driver) latestOffsets(ctx context.Context, keys []string, current map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	latest := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		off, err := d.byKey[k].src.LatestOffset(ctx, current[k])
		if err != nil {
			return nil, fmt.Errorf("latest offset of source %q: %w", k, err)
		}
		if off != nil {
			if off, err = compactOffset(off); err != nil {
				return nil, fmt.Errorf("source %q returned an invalid offset: %w", k, err)
			}
		}
		latest[k] = off
	}
	return latest, nil
}

func compactOffset(off json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, off); err != nil {
		return nil, err
	}
	if b.String() == "null" {
		return nil, nil
	}
	return b.Bytes(), nil
}

func (q *Query) sourceNames() []string {
	names := make([]string, len(q.Sources))
	for i, ns := range q.Sources {
		names[i] = ns.Name
	}
	return names
}
