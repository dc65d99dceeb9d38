package engine

import (
	"context"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// startCheck is what checkStart read and decided; plain values. On a
// refusal it holds what was read before it (snap may be set, sp nil).
type startCheck struct {
	s    settings
	snap *checkpoint.Snapshot
	sp   *startPlan
	// rec is the recorded query shape (nil: none), sd the restart rules'
	// decision on the query's shape.
	rec *shape.Record
	sd  *shapeDecision
	// seen is what the start read of the sink's output.
	seen sinkSeen
	// moved holds the sources whose move the source admitted
	// (stream.MoveChecker): restart-rule source key -> old location; ""
	// for a source at a new location that cannot check a move at all.
	moved map[string]string
}

// checkStart is the one validation of a start, shared by Run and Plan (and,
// through checkRepartition, by RepartitionOffline): the confs, the source
// names, the columns read against the sources' schemas (validateReadPath),
// the checkpoint and the start it implies, the cross-checks of what
// two files of the checkpoint both record (checkRecords), the restart rules,
// the state partition counts against what the operator can hold, then a
// read-only probe of every source and of the sink (stream.Checker). It reads
// but never writes, creates or locks anything, so a refusal leaves the checkpoint byte-identical and a
// refused first start leaves no file or directory behind. Sources and an
// operator or sink that are nil (a plan from names alone) are not probed.
func checkStart(ctx context.Context, q Query, fs vfs.FS, dir string) (*startCheck, error) {
	if fs == nil {
		fs = vfs.Default
	}
	if dir == "" {
		return nil, errcode.New(errcode.InvalidArgument, "", "pass --checkpoint DIR", "no checkpoint directory")
	}
	s, err := parseSettings(q.Conf)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(q.Sources))
	for i, ns := range q.Sources {
		names[i] = ns.Name
	}
	if err := q.validateReadPath(); err != nil {
		return nil, err
	}
	if err := q.validateSides(); err != nil {
		return nil, err
	}
	snap, err := readSnapshot(fs, dir)
	if err != nil {
		return nil, err
	}
	chk := &startCheck{s: s, snap: snap}
	sp, err := planStart(snap, names, s)
	if err != nil {
		return chk, err
	}
	pinWatermarkPolicy(sp, s, q.multiWatermark())
	chk.sp = sp
	// The restart rules, over the recorded query shape.
	if (checkpoint.Dir{FS: fs, Path: dir}).Exists() {
		if chk.rec, err = shape.ReadLatest(fs, dir); err != nil {
			return chk, err
		}
	}
	// A checkpoint whose files disagree is damaged, whatever the query: this
	// comes before the restart rules, which compare the query with them.
	ids := numberingOf(chk.rec, q.Shape, snap.Latest != nil).treeIDs(q.operatorSides())
	recorded := recordedOperators(q.operators(), ids, chk.rec)
	if err := checkCommitted(ctx, fs, checkpoint.Dir{FS: fs, Path: dir}, snap, recorded); err != nil {
		return chk, err
	}
	if err := checkRecords(ctx, fs, checkpoint.Dir{FS: fs, Path: dir}, snap, chk.rec, recorded, keyedSources(q.Sources, s.evolution)); err != nil {
		return chk, err
	}
	if q.Sink != nil {
		chk.seen = readSink(ctx, q.Sink)
	}
	// A move the source refused is its error (it names the file), but the
	// rules still list every change, for plan to print.
	chk.moved, err = checkMoves(ctx, fs, dir, chk.rec, q, sp, s.evolution)
	moveErr := err
	chk.sd, err = decideShape(dir, chk.rec, q.Shape, sp, s.evolution, chk.seen, chk.moved)
	if moveErr != nil {
		return chk, moveErr
	}
	if err != nil {
		return chk, err
	}
	return chk, chk.checkTargets(ctx, q, fs, dir)
}

// recordedOperators is ops, listed in flow order with their ids, indexed
// by id and cut to the operators the checkpoint's query shape records:
// damage is judged on what the checkpoint holds. An operator the query
// adds has no state yet; that is a change of query, which the restart
// rules refuse (STATE_SCHEMA_MISMATCH), not damage. Without a shape record
// (a checkpoint older than shapes) every operator is checked.
func recordedOperators(ops []stream.Operator, ids []int, rec *shape.Record) []stream.Operator {
	byID := make([]stream.Operator, len(ops))
	for i, op := range ops {
		byID[ids[i]] = op
	}
	if rec == nil {
		return byID
	}
	return byID[:min(len(byID), len(rec.Shape.OperatorList()))]
}

// checkTargets is the end of checkStart, once the restart rules passed:
// the state partition counts against what the operator can hold, a
// read-only probe of every source and of the sink (stream.Checker), and
// the sink's agreement with the checkpoint and its owner.
func (chk *startCheck) checkTargets(ctx context.Context, q Query, fs vfs.FS, dir string) error {
	from, to := 0, chk.sp.Partitions
	switch {
	case chk.sp.RepartitionTo > 0:
		from, to = chk.sp.RepartitionFrom, chk.sp.RepartitionTo
	case chk.sp.PendingRepartitionTo > 0:
		from, to = chk.sp.Partitions, chk.sp.PendingRepartitionTo
	}
	for _, op := range q.operators() {
		if err := checkPartitions(op, from, to); err != nil {
			return err
		}
	}
	for _, ns := range q.Sources {
		if c, ok := ns.Source.(stream.Checker); ok {
			if err := c.Check(ctx); err != nil {
				return err
			}
		}
	}
	if c, ok := q.Sink.(stream.Checker); ok {
		if err := c.Check(ctx); err != nil {
			return err
		}
	}
	if err := checkSinkAgrees(checkpoint.Dir{FS: fs, Path: dir}, chk.snap, q.Sink, chk.seen); err != nil {
		return err
	}
	if err := checkSinkOwner(dir, chk.rec, chk.snap, chk.sp.QueryID, chk.seen, q.SinkShared); err != nil {
		return err
	}
	return nil
}

// checkMoves asks every source whose recorded location differs from the
// starting query's (same key and provider: the restart rules' match) and
// that can resume a moved log (stream.MoveChecker) whether the move is
// admitted. The source only reads its metadata directory and the new
// location. It returns the admitted moves by restart-rule key, the input of
// decideShape, with "" for a source at a new location that cannot check a
// move (so the refusal does not suggest telling it of one); a source that
// was told of a move whose files do not match refuses the start with its
// own error.
func checkMoves(ctx context.Context, fs vfs.FS, dir string, rec *shape.Record, q Query, sp *startPlan, evolution bool) (map[string]string, error) {
	if rec == nil || q.Shape == nil {
		return nil, nil
	}
	c := shapeCheck{evolution: evolution}
	oldBy := map[string]shape.Source{}
	for i, s := range rec.Shape.Sources {
		oldBy[c.sourceKey(i, s)] = s
	}
	var moved map[string]string
	for i, ns := range q.Sources {
		if i >= len(q.Shape.Sources) || i >= len(sp.Keys) {
			break
		}
		cur := q.Shape.Sources[i]
		k := c.sourceKey(i, cur)
		o, ok := oldBy[k]
		mc, can := ns.Source.(stream.MoveChecker)
		if !ok || o.Provider != cur.Provider || o.Location == cur.Location {
			continue
		}
		if !can {
			if moved == nil {
				moved = map[string]string{}
			}
			moved[k] = ""
			continue
		}
		env := stream.SourceEnv{Name: ns.Name, FS: fs, MetadataDir: checkpoint.Dir{FS: fs, Path: dir}.Join(checkpoint.SourcesDir, sp.Keys[i])}
		admitted, err := mc.CheckMove(ctx, env, o.Location)
		if err != nil {
			return nil, err
		}
		if admitted {
			if moved == nil {
				moved = map[string]string{}
			}
			moved[k] = o.Location
		}
	}
	return moved, nil
}

// readSnapshot reads the checkpoint at dir without locking it; a missing
// directory is a new checkpoint.
func readSnapshot(fs vfs.FS, dir string) (*checkpoint.Snapshot, error) {
	d := checkpoint.Dir{FS: fs, Path: dir}
	if !d.Exists() {
		return &checkpoint.Snapshot{Path: dir, LatestID: -1, CommittedID: -1}, nil
	}
	return d.ReadSnapshot()
}

// checkPartitions refuses a partition count outside 1..MaxStatePartitions,
// or one the operator cannot hold (stream.PartitionLimiter).
func checkPartitions(op any, from, to int) error {
	if to < 1 || to > MaxStatePartitions {
		return errcode.New(errcode.InvalidArgument, "", "use a state partition count from 1 to "+strconv.Itoa(MaxStatePartitions),
			"state partition count %d is out of range", to)
	}
	if pl, ok := op.(stream.PartitionLimiter); ok {
		return pl.CheckPartitions(from, to)
	}
	return nil
}

// CheckPartitionCount refuses a `checkpoint repartition --partitions` count
// outside 1..MaxStatePartitions; it looks at nothing else.
func CheckPartitionCount(n int) error {
	if err := checkPartitionsParam(n); err != nil {
		return err
	}
	if n > MaxStatePartitions {
		return errcode.New(errcode.InvalidArgument, "", "pass --partitions N with N from 1 to "+strconv.Itoa(MaxStatePartitions),
			"state partition count %d is out of range", n)
	}
	return nil
}

// checkRepartition is RepartitionOffline's part of the one validation path,
// reading only: the count, the checkpoint (it must exist: the lock would
// create it), the decision the locked procedure will take (planOffline), and
// what the operator's state (an Operator or stream.RecordedStates) can hold. alreadyAt is set when the state has n
// partitions already (nothing to do).
func checkRepartition(o Options, op any, n int) (alreadyAt *RepartitionResult, err error) {
	if err := CheckPartitionCount(n); err != nil {
		return nil, err
	}
	d := checkpoint.Dir{FS: o.FS, Path: o.CheckpointDir}
	if !d.Exists() {
		return nil, errcode.New(ErrRepartitionNoCommittedBatch, o.CheckpointDir, "check the path; repartition works on the checkpoint of a query that committed a batch",
			"checkpoint directory does not exist")
	}
	snap, err := d.ReadSnapshot()
	if err != nil {
		return nil, err
	}
	ops, err := stateOperators(d)
	if err != nil {
		return nil, err
	}
	p, res, err := planOffline(snap, n, checkpoint.DefaultMinBatchesToRetain, ops)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return res, nil
	}
	// A repartition writes a batch: it believes what a start believes, of
	// every operator's state (read as recorded, when op reads it so).
	recs := make([]stream.StateRecorder, ops)
	if sr, ok := op.(stream.StateRecorder); ok {
		for i := range recs {
			recs[i] = sr
		}
	}
	if err := checkCommittedStates(context.Background(), o.FS, d, snap, recs); err != nil {
		return nil, err
	}
	return nil, checkPartitions(op, res.From, n)
}
