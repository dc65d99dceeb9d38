package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
)

// ValidSourceName reports whether name matches ^[a-zA-Z0-9_]+$ (docs/contracts.md, Errors).
func ValidSourceName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validateNames applies the rules that need no checkpoint: name syntax,
// enforcement (every source named with evolution on), naming without
// evolution, duplicates, and evolution with an explicit format version 1.
// In Spark the first three fail at .name()/.load(), duplicates at start().
//
// ckptEvolution is the source evolution setting a checkpoint was written
// with (false for a new one): it makes the remedy of a named source without
// evolution the one that starts, instead of "leave them unnamed", which on
// such a checkpoint is CONFIG_MISMATCH.
func validateNames(names []string, s settings, ckptEvolution bool) error {
	for _, n := range names {
		if n != "" && !ValidSourceName(n) {
			return errcode.New(errcode.InvalidSourceName, "",
				"use only ASCII letters, digits and underscores",
				"invalid source name %q", n)
		}
	}
	if s.evolution {
		var unnamed []string
		for i, n := range names {
			if n == "" {
				unnamed = append(unnamed, fmt.Sprintf("Leaf position %d", i))
			}
		}
		if len(unnamed) > 0 {
			return errcode.New(errcode.UnnamedSources, "",
				"name every source (NAME=FORMAT:URI) when source evolution is enabled",
				"source evolution is enabled but these sources are unnamed: %s", strings.Join(unnamed, "; "))
		}
	} else {
		for _, n := range names {
			if n != "" && ckptEvolution {
				return errcode.New(errcode.SourceNamingUnsupported, "",
					"set "+checkpoint.ConfSourceEvolution+"=true and "+checkpoint.ConfOffsetLogVersion+"=2 as the checkpoint was written: its sources are tracked by name, so they stay named",
					"source %q is named but source evolution is disabled, on a checkpoint written with it", n)
			}
			if n != "" {
				return errcode.New(errcode.SourceNamingUnsupported, "",
					"set "+checkpoint.ConfSourceEvolution+"=true to name sources, or leave them unnamed",
					"source %q is named but source evolution is disabled", n)
			}
		}
	}
	seen := map[string]bool{}
	var dups []string
	for _, n := range names {
		if n == "" {
			continue
		}
		if seen[n] && !contains(dups, n) {
			dups = append(dups, n)
		}
		seen[n] = true
	}
	if len(dups) > 0 {
		return errcode.New(errcode.DuplicateSourceNames, "", "give each source a unique name",
			"duplicate source names: %s", fmtNames(dups))
	}
	if s.evolution && s.formatVersion == checkpoint.OffsetsV1 {
		return errcode.New(errcode.NamedSourcesRequireV2, "",
			"set "+checkpoint.ConfOffsetLogVersion+"=2 or disable source evolution",
			"named sources need offset log V2 (OffsetMap), found V1")
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// startPlan is the pure decision of what a start does, computed from the
// checkpoint snapshot and the query before anything is written or opened.
type startPlan struct {
	New         bool
	QueryID     string // "" for a checkpoint without metadata yet
	Version     int
	Conf        map[string]string // pinned confs for every new entry
	Partitions  int               // state partitions the operator opens with
	Keys        []string          // checkpoint key of each query source
	Warnings    []string
	CommittedID int64 // last committed batch, -1 none: the operator's Open version

	// Committed is each query source's end offset of its last committed
	// batch (nil: never committed, starts from its configured start).
	Committed map[string]json.RawMessage
	Resumed   []string // keys with a committed or recorded offset
	Added     []string // keys new to the checkpoint

	// Pending is the uncommitted batch L to re-run first (nil if none).
	Pending      *checkpoint.OffsetEntry
	PendingID    int64
	PendingStart map[string]json.RawMessage // start offsets of L (end of L-1)
	// PendingPrevWatermark is batch L-1's watermark (0 when L is 0).
	PendingPrevWatermark int64
	// PendingRepartitionTo > 0 when L is an unfinished repartition to redo.
	PendingRepartitionTo int

	// RepartitionTo > 0 when a control batch must run after any pending one.
	RepartitionFrom, RepartitionTo int

	// Last is the newest entry once the pending batch (if any) is done; new
	// batches continue from its offsets. nil for a new checkpoint.
	Last *checkpoint.OffsetEntry
	// Watermark in force for the next new batch (commit C's
	// nextBatchWatermarkMs); a pending batch recomputes it.
	Watermark int64
	// Tombstones carried forward (from Last), and those this start adds in
	// the next new entry.
	Tombstones    map[string]checkpoint.Tombstone
	NewTombstones map[string]checkpoint.Tombstone
	NextID        int64
}

// planStart decides what a start does. It is a pure function of the
// snapshot, the query's source names and the session settings; every refusal
// happens here, before anything is written or any source is opened. The
// checks run in a fixed order (names, state provider, evolution, confs,
// sources, the pending batch), so a start with several faults always
// reports the same one.
func planStart(snap *checkpoint.Snapshot, names []string, s settings) (*startPlan, error) {
	if err := validateNames(names, s, snap.Latest != nil && snap.Latest.Metadata.Conf[checkpoint.ConfSourceEvolution] == "true"); err != nil {
		return nil, err
	}
	if err := snap.CheckStateProvider(); err != nil {
		return nil, err
	}
	p := &startPlan{QueryID: snap.Metadata.ID, Committed: map[string]json.RawMessage{},
		CommittedID: snap.CommittedID, PendingID: -1}
	if snap.Latest == nil {
		newStart(p, names, s)
		return p, nil
	}
	latest := snap.Latest
	p.Version = latest.Version
	if err := checkEvolution(snap.Path, latest, s); err != nil {
		return nil, err
	}
	p.Keys = sourceKeys(names, s.evolution)
	if err := pinConfs(p, snap, s); err != nil {
		return nil, err
	}
	if err := checkSources(snap.Path, snap.LatestID, latest, names, s); err != nil {
		return nil, err
	}
	p.Last, p.NextID = latest, snap.LatestID+1
	if snap.CommittedID < snap.LatestID {
		if err := planPending(p, snap, s); err != nil {
			return nil, err
		}
	}
	if snap.Committed != nil {
		p.Watermark = snap.Committed.NextBatchWatermarkMs
	}
	resumeSources(p, snap)
	planTombstones(p, latest, s)
	// Repartition after the pending batch, if requested.
	cur := p.Partitions
	if p.PendingRepartitionTo > 0 {
		cur = p.PendingRepartitionTo
	}
	p.RepartitionFrom, p.RepartitionTo = newRepartition(cur, s.stateParts)
	return p, nil
}

// newStart fills p for a new checkpoint (possibly with metadata already
// written): the session's format version, partitions and confs.
func newStart(p *startPlan, names []string, s settings) {
	p.New = true
	p.Version = checkpoint.OffsetsV1
	if s.formatVersion > 0 {
		p.Version = s.formatVersion
	}
	if s.evolution {
		p.Version = checkpoint.OffsetsV2
	}
	p.Partitions = DefaultShufflePartitions
	if s.shuffle > 0 {
		p.Partitions = s.shuffle
	}
	if s.stateParts > 0 {
		p.Partitions = s.stateParts
	}
	p.Conf = map[string]string{
		checkpoint.ConfShufflePartitions: strconv.Itoa(p.Partitions),
		checkpoint.ConfSourceEvolution:   strconv.FormatBool(s.evolution),
		checkpoint.ConfProviderClass:     checkpoint.ProviderPebble,
	}
	p.Keys = sourceKeys(names, s.evolution)
	p.Added = append([]string(nil), p.Keys...)
	p.Tombstones = map[string]checkpoint.Tombstone{}
	p.NewTombstones = map[string]checkpoint.Tombstone{}
	p.NextID = 0
}

// checkEvolution refuses a session whose source evolution setting the
// checkpoint cannot take: evolution on a V1 log, or a setting differing
// from the checkpoint's.
func checkEvolution(path string, latest *checkpoint.OffsetEntry, s settings) error {
	ckptEvolution := latest.Metadata.Conf[checkpoint.ConfSourceEvolution] == "true"
	if s.evolution && latest.Version < checkpoint.OffsetsV2 {
		return errcode.New(errcode.NamedSourcesRequireV2, path,
			"disable source evolution for this checkpoint, or start a new checkpoint with it enabled",
			"cannot enable source evolution on an existing checkpoint: named sources need offset log V2 (OffsetMap), found V%d", latest.Version)
	}
	if s.evolution != ckptEvolution {
		return errcode.New(errcode.ConfigMismatch, path,
			"set "+checkpoint.ConfSourceEvolution+"="+strconv.FormatBool(ckptEvolution)+" for this checkpoint",
			"%s differs from the checkpoint: sessionValue=%t checkpointValue=%t", checkpoint.ConfSourceEvolution, s.evolution, ckptEvolution)
	}
	return nil
}

// pinConfs sets p's confs from the latest entry (the checkpoint's values
// win over the session's, with a warning) and the partition count they
// pin.
func pinConfs(p *startPlan, snap *checkpoint.Snapshot, s settings) error {
	latest := snap.Latest
	p.Conf = map[string]string{}
	for k, v := range latest.Metadata.Conf {
		p.Conf[k] = v
	}
	session := map[string]string{}
	if s.shuffleExplicit {
		session[checkpoint.ConfShufflePartitions] = strconv.Itoa(s.shuffle)
	}
	if s.providerSet {
		session[checkpoint.ConfProviderClass] = s.providerClass
	}
	for _, k := range checkpoint.PinnedConfs {
		sv, ok := session[k]
		cv, cok := p.Conf[k]
		if !cok {
			if ok {
				p.Conf[k] = sv
			}
			continue
		}
		if ok && sv != cv {
			msg := fmt.Sprintf("conf %s=%s from the checkpoint overrides the session value %s", k, cv, sv)
			if k == checkpoint.ConfShufflePartitions {
				msg += "; it does not resize an existing checkpoint's state (set " + checkpoint.ConfStatePartitions + " to repartition)"
			}
			p.Warnings = append(p.Warnings, msg)
		}
	}
	if _, ok := p.Conf[checkpoint.ConfShufflePartitions]; !ok {
		p.Conf[checkpoint.ConfShufflePartitions] = strconv.Itoa(DefaultShufflePartitions)
	}
	// The session's setting equals the checkpoint's here (checkEvolution).
	p.Conf[checkpoint.ConfSourceEvolution] = strconv.FormatBool(s.evolution)
	if _, ok := p.Conf[checkpoint.ConfProviderClass]; !ok {
		p.Conf[checkpoint.ConfProviderClass] = checkpoint.ProviderPebble
	}
	parts, err := strconv.Atoi(p.Conf[checkpoint.ConfShufflePartitions])
	if err != nil || parts < 1 {
		return errcode.Corrupt(snap.Path, err, "offsets entry %d has an invalid %s", snap.LatestID, checkpoint.ConfShufflePartitions)
	}
	p.Partitions = parts
	return nil
}

// checkSources refuses a query whose sources the checkpoint cannot resume:
// another count on a positional checkpoint, or a tombstoned name reused.
func checkSources(path string, L int64, latest *checkpoint.OffsetEntry, names []string, s settings) error {
	if !s.evolution && len(latest.Sources) != len(names) {
		return errcode.New(errcode.SourceCountMismatch, path,
			"use the same sources as when the checkpoint was created, or start a new checkpoint (enable source evolution to add or remove sources later)",
			"the checkpoint has %d sources (offsets entry %d) but the query has %d", len(latest.Sources), L, len(names))
	}
	if !s.evolution {
		return nil
	}
	var reused []string
	for _, n := range names {
		if _, ok := latest.Metadata.Tombstones[n]; ok {
			reused = append(reused, n)
		}
	}
	if len(reused) > 0 {
		return errcode.New(errcode.TombstoneNameReuse, path,
			"pick a different name; reusing one may cause data-correctness problems",
			"source names %s were used, then removed from the query at %s", fmtNames(reused), path)
	}
	return nil
}

// planPending sets up the uncommitted batch L (C < L) to run first: an
// unfinished repartition to redo with the same target, or a data batch to
// re-run with exactly its recorded offsets from the end offsets of L-1.
func planPending(p *startPlan, snap *checkpoint.Snapshot, s settings) error {
	path, L, C, latest := snap.Path, snap.LatestID, snap.CommittedID, snap.Latest
	if C < L-1 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("latest commit %d is more than one batch behind offsets entry %d", C, L))
	}
	if from, to, ok := pendingRepartition(latest, snap.Prev); ok {
		if err := redoRepartition(path, L, from, to, s.stateParts,
			fmt.Sprintf("restart with %s=%d until the repartition finishes", checkpoint.ConfStatePartitions, to)); err != nil {
			return err
		}
		p.PendingRepartitionTo = to
		p.Partitions = from
	} else {
		var missing []string
		for _, so := range latest.Sources {
			if !contains(p.Keys, so.Key) {
				missing = append(missing, so.Key)
			}
		}
		if len(missing) > 0 {
			return errcode.New(errcode.PendingBatchSourceMiss, path,
				"restart once with the sources of the pending batch so it completes, then change the sources",
				"pending batch %d must re-run with sources %s, which the query lacks", L, fmtNames(missing))
		}
	}
	p.Pending, p.PendingID = latest, L
	p.PendingStart = map[string]json.RawMessage{}
	if L > 0 {
		prev := snap.Prev
		if prev == nil {
			return errcode.Corrupt(snap.Path, nil, "offsets entry %d is missing: two subsequent offset logs are required to re-run batch %d", L-1, L)
		}
		for _, so := range prev.Sources {
			p.PendingStart[so.Key] = so.Offset
		}
		p.PendingPrevWatermark = prev.Metadata.BatchWatermarkMs
	}
	return nil
}

// resumeSources sets each query source's committed end offset (from the
// batch before the pending one, or the latest entry when everything is
// committed) and sorts the keys into resumed and added.
func resumeSources(p *startPlan, snap *checkpoint.Snapshot) {
	latest, base := snap.Latest, snap.Latest
	if p.Pending != nil {
		base = snap.Prev
	}
	for _, k := range p.Keys {
		if base != nil {
			if off, ok := base.Offset(k); ok {
				p.Committed[k] = off
				p.Resumed = append(p.Resumed, k)
				continue
			}
		}
		if _, ok := latest.Offset(k); ok {
			p.Resumed = append(p.Resumed, k) // first seen in the pending batch
			continue
		}
		p.Added = append(p.Added, k)
	}
}

// planTombstones carries the latest entry's tombstones forward and, with
// evolution, tombstones every source of the entry the query no longer has.
func planTombstones(p *startPlan, latest *checkpoint.OffsetEntry, s settings) {
	p.Tombstones = map[string]checkpoint.Tombstone{}
	for k, t := range latest.Metadata.Tombstones {
		p.Tombstones[k] = t
	}
	p.NewTombstones = map[string]checkpoint.Tombstone{}
	if !s.evolution {
		return
	}
	// A removed source cannot be in a pending batch (refused above), so its
	// line in the latest entry is its last committed end offset.
	for _, so := range latest.Sources {
		if !contains(p.Keys, so.Key) {
			p.NewTombstones[so.Key] = checkpoint.Tombstone{RemovedInBatch: -1, LastOffset: so.Offset}
		}
	}
}

// sourceKeys returns the checkpoint key of each source: its name with
// evolution on, its position otherwise.
func sourceKeys(names []string, evolution bool) []string {
	keys := make([]string, len(names))
	for i, n := range names {
		if evolution {
			keys[i] = n
		} else {
			keys[i] = strconv.Itoa(i)
		}
	}
	return keys
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
