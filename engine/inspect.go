package engine

import (
	"encoding/json"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
)

// InspectReport is `checkpoint inspect --json` (docs/contracts.md, CLI); its JSON
// field names and order are the contract. It is a plain value.
type InspectReport struct {
	QueryID                string             `json:"queryId"`
	FormatVersion          int                `json:"formatVersion"`
	LatestBatchID          *int64             `json:"latestBatchId"`
	LatestCommittedBatchID *int64             `json:"latestCommittedBatchId"`
	Sources                []InspectSource    `json:"sources"`
	Tombstones             []InspectTombstone `json:"tombstones"`
	StatePartitions        int                `json:"statePartitions"`
	Conf                   map[string]string  `json:"conf"`
	ControlBatches         []InspectControl   `json:"controlBatches"`
}

// InspectSource is a source line of the latest offsets entry.
type InspectSource struct {
	Name   string          `json:"name"`
	Offset json.RawMessage `json:"offset"`
}

// InspectTombstone is a removed source.
type InspectTombstone struct {
	Name           string          `json:"name"`
	RemovedInBatch int64           `json:"removedInBatch"`
	LastOffset     json.RawMessage `json:"lastOffset"`
}

// InspectControl is a control batch still in the offsets log.
type InspectControl struct {
	BatchID       int64  `json:"batchId"`
	OperationType string `json:"operationType"`
	From          int    `json:"from"`
	To            int    `json:"to"`
}

// Inspect reads the checkpoint at dir without writing or locking anything
// (safe on a running query's checkpoint).
func Inspect(fs vfs.FS, dir string) (*InspectReport, error) {
	d := checkpoint.Dir{FS: fs, Path: dir}
	snap, err := d.ReadExisting()
	if err != nil {
		return nil, err
	}
	rep := &InspectReport{QueryID: snap.Metadata.ID, Sources: []InspectSource{}, Tombstones: []InspectTombstone{},
		Conf: map[string]string{}, ControlBatches: []InspectControl{}}
	if snap.Latest == nil {
		return rep, nil
	}
	l := snap.LatestID
	rep.LatestBatchID = &l
	if snap.CommittedID >= 0 {
		c := snap.CommittedID
		rep.LatestCommittedBatchID = &c
	}
	rep.FormatVersion = snap.Latest.Version
	for _, s := range snap.Latest.Sources {
		rep.Sources = append(rep.Sources, InspectSource{Name: s.Key, Offset: s.Offset})
	}
	for _, k := range sortedKeys(snap.Latest.Metadata.Tombstones) {
		t := snap.Latest.Metadata.Tombstones[k]
		rep.Tombstones = append(rep.Tombstones, InspectTombstone{Name: k, RemovedInBatch: t.RemovedInBatch, LastOffset: t.LastOffset})
	}
	rep.Conf = snap.Latest.Metadata.Conf
	parts, _ := checkpoint.ConfValue(rep.Conf, checkpoint.ConfShufflePartitions)
	rep.StatePartitions, _ = strconv.Atoi(parts)
	ids, err := d.ListOffsets()
	if err != nil {
		return nil, err
	}
	var prev *checkpoint.OffsetEntry
	for i, id := range ids {
		e, err := d.ReadOffsets(id)
		if err != nil {
			return nil, err
		}
		if i > 0 && ids[i-1] != id-1 {
			prev = nil
		}
		if from, to, ok := pendingRepartition(e, prev); ok {
			rep.ControlBatches = append(rep.ControlBatches, InspectControl{BatchID: id, OperationType: checkpoint.OpRepartition, From: from, To: to})
		}
		prev = e
	}
	return rep, nil
}
