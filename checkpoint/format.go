package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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

// EncodeMetadata renders the metadata file as Spark writes it: the JSON
// object and no final newline.
func EncodeMetadata(m Metadata) ([]byte, error) {
	if m.ID == "" {
		return nil, errors.New("encode query metadata: empty id")
	}
	return json.Marshal(m)
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

// decodeMeta decodes line 2, matching its top-level keys exactly as Spark's
// JSON reader does (encoding/json alone would also take "BatchWatermarkMs").
// Unknown keys are ignored.
func decodeMeta(line string) (metaDecodeJSON, error) {
	var md metaDecodeJSON
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &obj); err != nil {
		return md, err
	}
	if obj == nil {
		return md, errors.New("metadata is not a JSON object")
	}
	fields := []struct {
		key string
		dst any
	}{
		{"batchWatermarkMs", &md.BatchWatermarkMs},
		{"batchTimestampMs", &md.BatchTimestampMs},
		{"conf", &md.Conf},
		{"sourceMetadataInfo", &md.SourceMetadataInfo},
		{"controlBatchInfo", &md.ControlBatchInfo},
		{"tombstones", &md.Tombstones},
	}
	for _, f := range fields {
		if raw, ok := obj[f.key]; ok {
			if err := json.Unmarshal(raw, f.dst); err != nil {
				return md, fmt.Errorf("field %s: %w", f.key, err)
			}
		}
	}
	return md, nil
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
	// Spark's layout: every line but the first starts with "\n", and the
	// file does not end with one.
	fmt.Fprintf(&b, "v%d", e.Version)
	b.WriteByte('\n')
	b.Write(meta)
	seen := make(map[string]bool, len(e.Sources))
	for _, s := range e.Sources {
		b.WriteByte('\n')
		if e.Version == OffsetsV2 {
			if s.Key == "" || strings.ContainsAny(s.Key, ":\n") {
				return nil, fmt.Errorf("invalid source key %q", s.Key)
			}
			if seen[s.Key] {
				return nil, fmt.Errorf("duplicate source key %q", s.Key)
			}
			seen[s.Key] = true
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
			if c == nil {
				return nil, fmt.Errorf("offset of source %q is null (use a nil Offset for none)", s.Key)
			}
			b.Write(c)
		}
	}
	if e.Version == OffsetsV2 {
		// A source may lack an entry (Spark writes "{}"), but an entry must
		// have its line: the reader treats a missing one as damage.
		for _, k := range slices.Sorted(maps.Keys(m.SourceMetadataInfo)) {
			if !seen[k] {
				return nil, fmt.Errorf("sourceMetadataInfo entry %q has no source line", k)
			}
		}
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

// splitLines splits a log file into its lines as Spark reads them (Java's
// readLine): a line ends at "\n", "\r\n" or "\r", and the last line may
// end without one. Spark writes no final newline, earlier ethstream versions
// wrote one; both read the same. A missing final newline is not truncation:
// a published file is complete (it was linked or renamed into place), so the
// corruption signal is a line that does not parse.
func splitLines(path string, data []byte) ([]string, error) {
	if len(data) == 0 {
		return nil, errcode.Corrupt(path, nil, "empty file")
	}
	var lines []string
	start := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '\n':
			lines = append(lines, string(data[start:i]))
			start = i + 1
		case '\r':
			lines = append(lines, string(data[start:i]))
			if i+1 < len(data) && data[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	if start < len(data) {
		lines = append(lines, string(data[start:]))
	}
	return lines, nil
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
	e := &OffsetEntry{Version: v, Metadata: OffsetMetadata{Conf: map[string]string{}}}
	// As Spark, a V1 metadata line that is blank means "no metadata".
	if v == OffsetsV2 || strings.TrimSpace(lines[1]) != "" {
		if e.Metadata, err = parseOffsetsMeta(path, v, lines[1]); err != nil {
			return nil, err
		}
	}
	seen := make(map[string]bool)
	for i, line := range lines[2:] {
		s, err := parseSourceLine(path, v, i, line, seen)
		if err != nil {
			return nil, err
		}
		e.Sources = append(e.Sources, s)
	}
	var missing []string
	for _, k := range slices.Sorted(maps.Keys(e.Metadata.SourceMetadataInfo)) {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, errcode.Corrupt(path, nil, "truncated offsets entry: no line for sources %v", missing)
	}
	return e, nil
}

// parseOffsetsMeta decodes line 2 of an offsets entry of version v.
func parseOffsetsMeta(path string, v int, line string) (OffsetMetadata, error) {
	md, err := decodeMeta(line)
	if err != nil {
		return OffsetMetadata{}, errcode.Corrupt(path, err, "unparsable offsets metadata")
	}
	if md.BatchWatermarkMs == nil || md.BatchTimestampMs == nil {
		return OffsetMetadata{}, errcode.Corrupt(path, nil, "offsets metadata lacks batchWatermarkMs or batchTimestampMs")
	}
	m := OffsetMetadata{
		BatchWatermarkMs: *md.BatchWatermarkMs,
		BatchTimestampMs: *md.BatchTimestampMs,
		Conf:             md.Conf,
	}
	if m.Conf == nil {
		m.Conf = map[string]string{}
	}
	if v != OffsetsV2 {
		return m, nil
	}
	m.SourceMetadataInfo = md.SourceMetadataInfo
	if m.SourceMetadataInfo == nil {
		m.SourceMetadataInfo = map[string]SourceMetadata{}
	}
	m.ControlBatchInfo = md.ControlBatchInfo
	if c := md.ControlBatchInfo; c != nil && c.OperationType == "" {
		return OffsetMetadata{}, errcode.Corrupt(path, nil, "controlBatchInfo without operationType")
	}
	if len(md.Tombstones) > 0 {
		m.Tombstones = make(map[string]Tombstone, len(md.Tombstones))
		for k, t := range md.Tombstones {
			if t.LastOffset != nil {
				if t.LastOffset, err = compact(t.LastOffset); err != nil {
					return OffsetMetadata{}, errcode.Corrupt(path, err, "tombstone %q has an invalid lastOffset", k)
				}
			}
			m.Tombstones[k] = t
		}
	}
	return m, nil
}

// parseSourceLine decodes source line i (from 0, file line i+3) of an
// offsets entry of version v; seen collects the V2 keys.
func parseSourceLine(path string, v, i int, line string, seen map[string]bool) (SourceOffset, error) {
	key := strconv.Itoa(i)
	val := line
	if v == OffsetsV2 {
		k, rest, ok := strings.Cut(line, ":")
		if !ok || k == "" {
			return SourceOffset{}, errcode.Corrupt(path, nil, "source line %d is not <key>:<offset>: %q", i+3, truncate(line))
		}
		if seen[k] {
			return SourceOffset{}, errcode.Corrupt(path, nil, "source %q appears twice", k)
		}
		// A line without a sourceMetadataInfo entry is keyed by its
		// line alone, as Spark reads it ("sourceMetadataInfo":{}).
		seen[k] = true
		key, val = k, rest
	}
	var off json.RawMessage
	if val != "-" {
		var err error
		if off, err = compact([]byte(val)); err != nil {
			return SourceOffset{}, errcode.Corrupt(path, err, "source %q has an invalid offset", key)
		}
		if off == nil {
			return SourceOffset{}, errcode.Corrupt(path, nil, "source %q has a null offset (use -)", key)
		}
	}
	return SourceOffset{Key: key, Offset: off}, nil
}

// CommitEntry is one commits/<batchId> file.
type CommitEntry struct {
	NextBatchWatermarkMs int64 `json:"nextBatchWatermarkMs"`
	// noWatermark: the file records no nextBatchWatermarkMs (Spark 2.2's
	// "{}"); it reads as 0 but is not compared with anything (CheckWatermark).
	noWatermark bool
}

// EncodeCommit renders a commit entry as Spark writes it (no final newline);
// one read from a file without nextBatchWatermarkMs renders as that file did.
func EncodeCommit(c *CommitEntry) []byte {
	if c.noWatermark && c.NextBatchWatermarkMs == 0 {
		return fmt.Appendf(nil, "v%d\n{}", CommitV1)
	}
	return fmt.Appendf(nil, "v%d\n{\"nextBatchWatermarkMs\":%d}", CommitV1, c.NextBatchWatermarkMs)
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
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(lines[1]), &raw); err != nil || raw == nil {
		return nil, errcode.Corrupt(path, err, "unparsable commit entry")
	}
	c := &CommitEntry{}
	// Spark 2.2 wrote "{}" (its commit log had no fields yet), and Spark
	// reads a missing nextBatchWatermarkMs as 0.
	v, ok := raw["nextBatchWatermarkMs"]
	if !ok {
		c.noWatermark = true
	} else if err := json.Unmarshal(v, &c.NextBatchWatermarkMs); err != nil || string(v) == "null" {
		return nil, errcode.Corrupt(path, err, "commit entry has an invalid nextBatchWatermarkMs")
	}
	return c, nil
}

// OffsetsCodec is the Codec of offsets/<batchId> (doc.go: offsets, versions 1
// and 2).
type OffsetsCodec struct{ BatchNames }

// Encode renders an offsets entry (EncodeOffsets).
func (OffsetsCodec) Encode(_ int64, e *OffsetEntry) ([]byte, error) { return EncodeOffsets(e) }

// Decode parses an offsets entry (ParseOffsets).
func (OffsetsCodec) Decode(path string, _ int64, data []byte) (*OffsetEntry, error) {
	return ParseOffsets(path, data)
}

// CommitsCodec is the Codec of commits/<batchId> (doc.go: commits).
type CommitsCodec struct{ BatchNames }

// Encode renders a commit entry (EncodeCommit).
func (CommitsCodec) Encode(_ int64, c *CommitEntry) ([]byte, error) { return EncodeCommit(c), nil }

// Decode parses a commit entry (ParseCommit).
func (CommitsCodec) Decode(path string, _ int64, data []byte) (*CommitEntry, error) {
	return ParseCommit(path, data)
}
