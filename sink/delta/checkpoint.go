package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/internal/interval"
	"github.com/parquet-go/parquet-go"
)

// CheckpointInterval: a checkpoint is written after committing version v
// when v != 0 and v % CheckpointInterval == 0 (Spark's default).
const CheckpointInterval = 10

// defaultTombstoneRetention is delta.deletedFileRetentionDuration's default.
const defaultTombstoneRetention = 7 * 24 * time.Hour

// Checkpoint row layout (classic V1). Every field is OPTIONAL, pointers so
// that zero values (version 0, dataChange=false) are not written as null.
type cpTxn struct {
	AppID       *string `parquet:"appId,optional"`
	Version     *int64  `parquet:"version,optional"`
	LastUpdated *int64  `parquet:"lastUpdated,optional"`
}

type cpAdd struct {
	Path             *string            `parquet:"path,optional"`
	PartitionValues  map[string]*string `parquet:"partitionValues,optional"`
	Size             *int64             `parquet:"size,optional"`
	ModificationTime *int64             `parquet:"modificationTime,optional"`
	DataChange       *bool              `parquet:"dataChange,optional"`
	Tags             map[string]*string `parquet:"tags,optional"`
	Stats            *string            `parquet:"stats,optional"`
}

type cpRemove struct {
	Path                 *string            `parquet:"path,optional"`
	DeletionTimestamp    *int64             `parquet:"deletionTimestamp,optional"`
	DataChange           *bool              `parquet:"dataChange,optional"`
	ExtendedFileMetadata *bool              `parquet:"extendedFileMetadata,optional"`
	PartitionValues      map[string]*string `parquet:"partitionValues,optional"`
	Size                 *int64             `parquet:"size,optional"`
}

type cpFormat struct {
	Provider *string           `parquet:"provider,optional"`
	Options  map[string]string `parquet:"options,optional"`
}

type cpMetaData struct {
	ID               *string           `parquet:"id,optional"`
	Name             *string           `parquet:"name,optional"`
	Description      *string           `parquet:"description,optional"`
	Format           *cpFormat         `parquet:"format,optional"`
	SchemaString     *string           `parquet:"schemaString,optional"`
	PartitionColumns []string          `parquet:"partitionColumns,optional,list"`
	Configuration    map[string]string `parquet:"configuration,optional"`
	CreatedTime      *int64            `parquet:"createdTime,optional"`
}

type cpProtocol struct {
	MinReaderVersion *int32 `parquet:"minReaderVersion,optional"`
	MinWriterVersion *int32 `parquet:"minWriterVersion,optional"`
}

type cpRow struct {
	Txn      *cpTxn      `parquet:"txn,optional"`
	Add      *cpAdd      `parquet:"add,optional"`
	Remove   *cpRemove   `parquet:"remove,optional"`
	MetaData *cpMetaData `parquet:"metaData,optional"`
	Protocol *cpProtocol `parquet:"protocol,optional"`
}

// checkpointSchema names the root as Spark does.
var checkpointSchema = parquet.NewSchema("spark_schema", parquet.SchemaOf(new(cpRow)))

func ptr[T any](v T) *T { return &v }

// lastCheckpoint is the _last_checkpoint file.
type lastCheckpoint struct {
	Version       int64  `json:"version"`
	Size          int64  `json:"size"`
	SizeInBytes   *int64 `json:"sizeInBytes,omitempty"`
	NumOfAddFiles *int64 `json:"numOfAddFiles,omitempty"`
}

// checkpointRows lays out the snapshot as checkpoint rows: protocol,
// metaData, txns, live adds and unexpired removes (dataChange=false).
func (s *Snapshot) checkpointRows(now time.Time) []cpRow {
	rows := []cpRow{
		{Protocol: &cpProtocol{MinReaderVersion: ptr(int32(s.Protocol.MinReaderVersion)), MinWriterVersion: ptr(int32(s.Protocol.MinWriterVersion))}},
	}
	m := s.Metadata
	pcols := m.PartitionColumns
	if pcols == nil {
		pcols = []string{}
	}
	rows = append(rows, cpRow{MetaData: &cpMetaData{
		ID: ptr(m.ID), Name: m.Name, Description: m.Description,
		Format:       &cpFormat{Provider: ptr(m.Format.Provider), Options: nonNil(m.Format.Options)},
		SchemaString: ptr(m.SchemaString), PartitionColumns: pcols,
		Configuration: nonNil(m.Configuration), CreatedTime: m.CreatedTime,
	}})
	appIDs := make([]string, 0, len(s.txns))
	for id := range s.txns {
		appIDs = append(appIDs, id)
	}
	sort.Strings(appIDs)
	for _, id := range appIDs {
		tx := s.txns[id]
		rows = append(rows, cpRow{Txn: &cpTxn{AppID: ptr(tx.AppID), Version: ptr(tx.Version), LastUpdated: tx.LastUpdated}})
	}
	for _, f := range s.Files() {
		a := &cpAdd{
			Path: ptr(f.Path), PartitionValues: nonNilPV(f.PartitionValues), Size: ptr(f.Size),
			ModificationTime: ptr(f.ModificationTime), DataChange: ptr(false),
		}
		if len(f.Tags) > 0 {
			a.Tags = f.Tags
		}
		if f.Stats != "" {
			a.Stats = ptr(f.Stats)
		}
		rows = append(rows, cpRow{Add: a})
	}
	cutoff := now.Add(-s.tombstoneRetention()).UnixMilli()
	for _, r := range s.Tombstones() {
		if r.DeletionTimestamp != nil && *r.DeletionTimestamp < cutoff {
			continue // expired: VACUUM may already have deleted the file
		}
		rows = append(rows, cpRow{Remove: &cpRemove{
			Path: ptr(r.Path), DeletionTimestamp: r.DeletionTimestamp, DataChange: ptr(false),
			ExtendedFileMetadata: r.ExtendedFileMetadata, PartitionValues: nonNilPV(r.PartitionValues), Size: r.Size,
		}})
	}
	return rows
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// tombstoneRetention is delta.deletedFileRetentionDuration when it is given
// as "interval N <unit>", else one week.
func (s *Snapshot) tombstoneRetention() time.Duration {
	if d, ok := parseInterval(s.Metadata.Configuration["delta.deletedFileRetentionDuration"]); ok {
		return d
	}
	return defaultTombstoneRetention
}

// parseInterval reads a table property's interval ("interval 1 week",
// Delta's spelling) with the one interval parser.
func parseInterval(s string) (time.Duration, bool) {
	d, err := interval.Parse(s)
	return d, err == nil
}

// writeCheckpoint writes the classic checkpoint of s (which must be at a
// committed version) and then points _last_checkpoint at it. Both are
// derived data, replaced atomically; a crash between them leaves a valid
// older pointer, and readers trust the listing over the pointer anyway.
func (s *Snapshot) writeCheckpoint(now time.Time) error {
	return s.table.writeCheckpointRows(s.Version, s.checkpointRows(now), int64(len(s.files)))
}

// writeCheckpointRows writes the checkpoint of version from its rows
// (checkpointRows) and the number of its live files, then points
// _last_checkpoint at it.
func (t *Table) writeCheckpointRows(version int64, rows []cpRow, adds int64) error {
	path := t.checkpointPath(version)
	// Streamed into the publish: a table with many files has a large checkpoint.
	res, err := t.pub.Publish(t.logDir, t.fs.PathBase(path), durable.Options{Mode: durable.Replace}, func(f io.Writer) error {
		w := parquet.NewGenericWriter[cpRow](f, checkpointSchema, parquet.Compression(&parquet.Snappy))
		if _, err := w.Write(rows); err != nil {
			return fmt.Errorf("encode checkpoint %d: %w", version, err)
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("encode checkpoint %d: %w", version, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write checkpoint %s: %w", path, err)
	}
	lc := lastCheckpoint{Version: version, Size: int64(len(rows)), SizeInBytes: ptr(res.Size), NumOfAddFiles: &adds}
	js, _ := json.Marshal(lc)
	lp := t.fs.PathJoin(t.logDir, "_last_checkpoint")
	if err := t.replaceFile(lp, js); err != nil {
		return fmt.Errorf("write %s: %w", lp, err)
	}
	return nil
}

// readLastCheckpoint returns the pointer, or ok=false if it is absent.
func (t *Table) readLastCheckpoint() (lastCheckpoint, bool, error) {
	var lc lastCheckpoint
	p := t.fs.PathJoin(t.logDir, "_last_checkpoint")
	data, err := t.readFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return lc, false, nil
		}
		return lc, false, err
	}
	if err := json.Unmarshal(data, &lc); err != nil {
		return lc, false, corrupt(p, err, "_last_checkpoint does not parse")
	}
	return lc, true, nil
}
