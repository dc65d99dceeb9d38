package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/errcode"
)

// Format versions. Never renumbered; readers refuse larger ones.
const (
	OffsetsV1     = 1
	OffsetsV2     = 2
	MaxOffsetsVer = OffsetsV2
	CommitV1      = 1
)

// OpRepartition is controlBatchInfo.operationType of a repartition batch.
const OpRepartition = "REPARTITION"

// Metadata is the metadata file: the query id.
type Metadata struct {
	ID string `json:"id"`
}

// ParseMetadata decodes the metadata file at path.
func ParseMetadata(path string, data []byte) (Metadata, error) {
	var m Metadata
	line := bytes.TrimSuffix(data, []byte("\n"))
	if err := json.Unmarshal(line, &m); err != nil {
		return Metadata{}, errcode.Corrupt(path, err, "unparsable query metadata")
	}
	if m.ID == "" {
		return Metadata{}, errcode.Corrupt(path, nil, "query metadata has no id")
	}
	return m, nil
}

// EncodeMetadata renders the metadata file.
func EncodeMetadata(m Metadata) ([]byte, error) {
	if m.ID == "" {
		return nil, errors.New("encode query metadata: empty id")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// OffsetEntry is one offsets/<batchId> file.
type OffsetEntry struct {
	// Version is OffsetsV1 or OffsetsV2.
	Version  int
	Metadata OffsetMetadata
	// Sources in line order. Key is the position ("0", "1", ...) in V1 and the
	// source key (name, or position without evolution) in V2.
	Sources []SourceOffset
}

// SourceOffset is one source line: its end offset for the batch, nil for "-".
type SourceOffset struct {
	Key    string
	Offset json.RawMessage
}

// OffsetMetadata is line 2 of an offsets entry. V2-only fields are ignored
// when writing V1.
type OffsetMetadata struct {
	BatchWatermarkMs   int64
	BatchTimestampMs   int64
	Conf               map[string]string
	SourceMetadataInfo map[string]SourceMetadata
	ControlBatchInfo   *ControlBatchInfo
	Tombstones         map[string]Tombstone
}

// SourceMetadata describes an active source in V2 metadata.
type SourceMetadata struct {
	SourceID     string `json:"sourceId"`
	ProviderName string `json:"providerName"`
	APIVersion   string `json:"apiVersion"`
}

// ControlBatchInfo marks a control batch (no input is read).
type ControlBatchInfo struct {
	OperationType string            `json:"operationType"`
	OperationInfo map[string]string `json:"operationInfo,omitempty"`
}

// Tombstone records a source removed from the query.
type Tombstone struct {
	RemovedInBatch int64           `json:"removedInBatch"`
	LastOffset     json.RawMessage `json:"lastOffset"`
}

// Offset returns the offset recorded for key, and whether key has a line.
func (e *OffsetEntry) Offset(key string) (json.RawMessage, bool) {
	for _, s := range e.Sources {
		if s.Key == key {
			return s.Offset, true
		}
	}
	return nil, false
}

// IsRepartition reports whether e is a repartition control batch, with its target.
func (e *OffsetEntry) IsRepartition() (from, to int, ok bool) {
	c := e.Metadata.ControlBatchInfo
	if c == nil || c.OperationType != OpRepartition {
		return 0, 0, false
	}
	from, _ = strconv.Atoi(c.OperationInfo["from"])
	to, _ = strconv.Atoi(c.OperationInfo["to"])
	return from, to, true
}

// Clone returns a deep copy of e.
func (e *OffsetEntry) Clone() *OffsetEntry {
	c := &OffsetEntry{Version: e.Version, Metadata: e.Metadata}
	c.Metadata.Conf = cloneMap(e.Metadata.Conf)
	if e.Metadata.SourceMetadataInfo != nil {
		c.Metadata.SourceMetadataInfo = make(map[string]SourceMetadata, len(e.Metadata.SourceMetadataInfo))
		for k, v := range e.Metadata.SourceMetadataInfo {
			c.Metadata.SourceMetadataInfo[k] = v
		}
	}
	if e.Metadata.ControlBatchInfo != nil {
		ci := *e.Metadata.ControlBatchInfo
		ci.OperationInfo = cloneMap(ci.OperationInfo)
		c.Metadata.ControlBatchInfo = &ci
	}
	if e.Metadata.Tombstones != nil {
		c.Metadata.Tombstones = make(map[string]Tombstone, len(e.Metadata.Tombstones))
		for k, v := range e.Metadata.Tombstones {
			c.Metadata.Tombstones[k] = v
		}
	}
	c.Sources = append([]SourceOffset(nil), e.Sources...)
	return c
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// JSON shapes of line 2; field order is the on-disk key order.
type metaV1JSON struct {
	BatchWatermarkMs int64             `json:"batchWatermarkMs"`
	BatchTimestampMs int64             `json:"batchTimestampMs"`
	Conf             map[string]string `json:"conf"`
}

type metaV2JSON struct {
	BatchWatermarkMs   int64                     `json:"batchWatermarkMs"`
	BatchTimestampMs   int64                     `json:"batchTimestampMs"`
	Conf               map[string]string         `json:"conf"`
	SourceMetadataInfo map[string]SourceMetadata `json:"sourceMetadataInfo"`
	ControlBatchInfo   *ControlBatchInfo         `json:"controlBatchInfo"`
	Tombstones         map[string]Tombstone      `json:"tombstones,omitempty"`
}

// decoding shape: pointers detect missing required fields.
type metaDecodeJSON struct {
	BatchWatermarkMs   *int64                    `json:"batchWatermarkMs"`
	BatchTimestampMs   *int64                    `json:"batchTimestampMs"`
	Conf               map[string]string         `json:"conf"`
	SourceMetadataInfo map[string]SourceMetadata `json:"sourceMetadataInfo"`
	ControlBatchInfo   *ControlBatchInfo         `json:"controlBatchInfo"`
	Tombstones         map[string]Tombstone      `json:"tombstones"`
}

// EncodeOffsets renders an offsets entry. Offsets must be valid JSON; they
// are compacted onto one line.
func EncodeOffsets(e *OffsetEntry) ([]byte, error) {
	var b bytes.Buffer
	m := e.Metadata
	conf := m.Conf
	if conf == nil {
		conf = map[string]string{}
	}
	var meta []byte
	var err error
	switch e.Version {
	case OffsetsV1:
		meta, err = json.Marshal(metaV1JSON{m.BatchWatermarkMs, m.BatchTimestampMs, conf})
	case OffsetsV2:
		smi := m.SourceMetadataInfo
		if smi == nil {
			smi = map[string]SourceMetadata{}
		}
		tombs := make(map[string]Tombstone, len(m.Tombstones))
		for k, t := range m.Tombstones {
			if t.LastOffset != nil {
				if t.LastOffset, err = compact(t.LastOffset); err != nil {
					return nil, fmt.Errorf("tombstone %q: %w", k, err)
				}
			}
			tombs[k] = t
		}
		meta, err = json.Marshal(metaV2JSON{m.BatchWatermarkMs, m.BatchTimestampMs, conf, smi, m.ControlBatchInfo, tombs})
	default:
		return nil, fmt.Errorf("unsupported offsets version %d", e.Version)
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "v%d\n", e.Version)
	b.Write(meta)
	b.WriteByte('\n')
	seen := make(map[string]bool, len(e.Sources))
	for _, s := range e.Sources {
		if e.Version == OffsetsV2 {
			if s.Key == "" || strings.ContainsAny(s.Key, ":\n") {
				return nil, fmt.Errorf("invalid source key %q", s.Key)
			}
			if seen[s.Key] {
				return nil, fmt.Errorf("duplicate source key %q", s.Key)
			}
			seen[s.Key] = true
			if _, ok := m.SourceMetadataInfo[s.Key]; !ok {
				return nil, fmt.Errorf("source %q has no sourceMetadataInfo entry", s.Key)
			}
			b.WriteString(s.Key)
			b.WriteByte(':')
		}
		if s.Offset == nil {
			b.WriteByte('-')
		} else {
			c, err := compact(s.Offset)
			if err != nil {
				return nil, fmt.Errorf("offset of source %q: %w", s.Key, err)
			}
			b.Write(c)
		}
		b.WriteByte('\n')
	}
	if e.Version == OffsetsV2 && len(seen) != len(m.SourceMetadataInfo) {
		return nil, fmt.Errorf("sourceMetadataInfo has %d entries for %d source lines", len(m.SourceMetadataInfo), len(seen))
	}
	return b.Bytes(), nil
}

func compact(raw []byte) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	if b.String() == "null" {
		return nil, nil
	}
	return b.Bytes(), nil
}

// parseVersion parses line 1 ("v<N>", N > 0) and refuses N > max.
func parseVersion(path, line string, max int) (int, error) {
	if len(line) < 2 || line[0] != 'v' {
		return 0, errcode.Corrupt(path, nil, "malformed log file: version line %q", truncate(line))
	}
	for i := 1; i < len(line); i++ {
		if line[i] < '0' || line[i] > '9' {
			return 0, errcode.Corrupt(path, nil, "malformed log file: version line %q", truncate(line))
		}
	}
	v, err := strconv.Atoi(line[1:])
	if err != nil || v <= 0 {
		return 0, errcode.Corrupt(path, nil, "malformed log file: version line %q", truncate(line))
	}
	if v > max {
		return 0, errcode.Corrupt(path, nil, "unsupported future version v%d (this ethstream reads up to v%d); upgrade ethstream", v, max)
	}
	return v, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// splitLines splits a file that must end with "\n" into its lines.
func splitLines(path string, data []byte) ([]string, error) {
	if len(data) == 0 {
		return nil, errcode.Corrupt(path, nil, "empty file")
	}
	if data[len(data)-1] != '\n' {
		return nil, errcode.Corrupt(path, nil, "truncated file: no final newline")
	}
	return strings.Split(string(data[:len(data)-1]), "\n"), nil
}

// ParseOffsets decodes an offsets entry read from path. Any defect is
// CHECKPOINT_CORRUPT naming path.
func ParseOffsets(path string, data []byte) (*OffsetEntry, error) {
	lines, err := splitLines(path, data)
	if err != nil {
		return nil, err
	}
	v, err := parseVersion(path, lines[0], MaxOffsetsVer)
	if err != nil {
		return nil, err
	}
	if len(lines) < 2 {
		return nil, errcode.Corrupt(path, nil, "truncated offsets entry: no metadata line")
	}
	e := &OffsetEntry{Version: v}
	if v == OffsetsV2 || lines[1] != "" {
		var md metaDecodeJSON
		if err := json.Unmarshal([]byte(lines[1]), &md); err != nil {
			return nil, errcode.Corrupt(path, err, "unparsable offsets metadata")
		}
		if md.BatchWatermarkMs == nil || md.BatchTimestampMs == nil {
			return nil, errcode.Corrupt(path, nil, "offsets metadata lacks batchWatermarkMs or batchTimestampMs")
		}
		e.Metadata = OffsetMetadata{
			BatchWatermarkMs: *md.BatchWatermarkMs,
			BatchTimestampMs: *md.BatchTimestampMs,
			Conf:             md.Conf,
		}
		if e.Metadata.Conf == nil {
			e.Metadata.Conf = map[string]string{}
		}
		if v == OffsetsV2 {
			e.Metadata.SourceMetadataInfo = md.SourceMetadataInfo
			if e.Metadata.SourceMetadataInfo == nil {
				e.Metadata.SourceMetadataInfo = map[string]SourceMetadata{}
			}
			e.Metadata.ControlBatchInfo = md.ControlBatchInfo
			if c := md.ControlBatchInfo; c != nil && c.OperationType == "" {
				return nil, errcode.Corrupt(path, nil, "controlBatchInfo without operationType")
			}
			if len(md.Tombstones) > 0 {
				e.Metadata.Tombstones = make(map[string]Tombstone, len(md.Tombstones))
				for k, t := range md.Tombstones {
					if t.LastOffset != nil {
						if t.LastOffset, err = compact(t.LastOffset); err != nil {
							return nil, errcode.Corrupt(path, err, "tombstone %q has an invalid lastOffset", k)
						}
					}
					e.Metadata.Tombstones[k] = t
				}
			}
		}
	} else {
		e.Metadata.Conf = map[string]string{}
	}
	seen := make(map[string]bool)
	for i, line := range lines[2:] {
		key := strconv.Itoa(i)
		val := line
		if v == OffsetsV2 {
			k, rest, ok := strings.Cut(line, ":")
			if !ok || k == "" {
				return nil, errcode.Corrupt(path, nil, "source line %d is not <key>:<offset>: %q", i+3, truncate(line))
			}
			if seen[k] {
				return nil, errcode.Corrupt(path, nil, "source %q appears twice", k)
			}
			if _, ok := e.Metadata.SourceMetadataInfo[k]; !ok {
				return nil, errcode.Corrupt(path, nil, "source %q has no sourceMetadataInfo entry", k)
			}
			seen[k] = true
			key, val = k, rest
		}
		var off json.RawMessage
		if val != "-" {
			if off, err = compact([]byte(val)); err != nil {
				return nil, errcode.Corrupt(path, err, "source %q has an invalid offset", key)
			}
			if off == nil {
				return nil, errcode.Corrupt(path, nil, "source %q has a null offset (use -)", key)
			}
		}
		e.Sources = append(e.Sources, SourceOffset{Key: key, Offset: off})
	}
	if v == OffsetsV2 && len(seen) != len(e.Metadata.SourceMetadataInfo) {
		missing := make([]string, 0)
		for k := range e.Metadata.SourceMetadataInfo {
			if !seen[k] {
				missing = append(missing, k)
			}
		}
		sort.Strings(missing)
		return nil, errcode.Corrupt(path, nil, "truncated offsets entry: no line for sources %v", missing)
	}
	return e, nil
}

// CommitEntry is one commits/<batchId> file.
type CommitEntry struct {
	NextBatchWatermarkMs int64 `json:"nextBatchWatermarkMs"`
}

// EncodeCommit renders a commit entry.
func EncodeCommit(c *CommitEntry) []byte {
	return fmt.Appendf(nil, "v%d\n{\"nextBatchWatermarkMs\":%d}\n", CommitV1, c.NextBatchWatermarkMs)
}

// ParseCommit decodes a commit entry read from path.
func ParseCommit(path string, data []byte) (*CommitEntry, error) {
	lines, err := splitLines(path, data)
	if err != nil {
		return nil, err
	}
	if _, err := parseVersion(path, lines[0], CommitV1); err != nil {
		return nil, err
	}
	if len(lines) != 2 {
		return nil, errcode.Corrupt(path, nil, "commit entry has %d lines, want 2", len(lines))
	}
	var raw struct {
		Next *int64 `json:"nextBatchWatermarkMs"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &raw); err != nil {
		return nil, errcode.Corrupt(path, err, "unparsable commit entry")
	}
	if raw.Next == nil {
		return nil, errcode.Corrupt(path, nil, "commit entry lacks nextBatchWatermarkMs")
	}
	return &CommitEntry{NextBatchWatermarkMs: *raw.Next}, nil
}
