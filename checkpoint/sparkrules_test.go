package checkpoint

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// This file is a test oracle: a second reader and writer of offsets and
// commit files that follow Spark's own rules (OffsetSeqLog, CommitLog,
// HDFSMetadataLog.validateVersion) as literally as Go allows, written
// independently of format.go. Our writer's output must read here with the
// same values, and anything our parser accepts must read here the same.

// sparkLines is scala.io.Source.getLines over Java's readLine: "\n", "\r\n"
// and "\r" end a line; the last line needs no terminator.
func sparkLines(data []byte) []string {
	var out []string
	r := bufio.NewReader(bytes.NewReader(data))
	var cur strings.Builder
	for {
		c, err := r.ReadByte()
		if err != nil {
			if cur.Len() > 0 {
				out = append(out, cur.String())
			}
			return out
		}
		switch c {
		case '\n':
			out = append(out, cur.String())
			cur.Reset()
		case '\r':
			out = append(out, cur.String())
			cur.Reset()
			if n, err := r.Peek(1); err == nil && n[0] == '\n' {
				_, _ = r.ReadByte()
			}
		default:
			cur.WriteByte(c)
		}
	}
}

// sparkVersion is MetadataVersionUtil.validateVersion: "v" + a Java int > 0,
// at most max.
func sparkVersion(text string, max int) (int, error) {
	if len(text) > 0 && text[0] == 'v' {
		v, err := strconv.ParseInt(text[1:], 10, 32) // Integer.parseInt accepts a sign
		if err != nil {
			return 0, errors.New("malformed log file")
		}
		if v > 0 {
			if int(v) > max {
				return 0, fmt.Errorf("log version %d greater than supported %d", v, max)
			}
			return int(v), nil
		}
	}
	return 0, errors.New("malformed log file")
}

// javaTrim is String.trim: strips chars <= ' ' from both ends.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// sparkOffsetSeq is what Spark's OffsetSeqLog.deserialize returns.
type sparkOffsetSeq struct {
	Version int
	// Metadata is nil when line 2 is blank; fields default as json4s does.
	Metadata *sparkMeta
	// Offsets in line order; "" for "-" (None). V2 keys in Keys.
	Offsets []string
	Keys    []string
}

type sparkMeta struct {
	BatchWatermarkMs int64
	BatchTimestampMs int64
	Conf             map[string]string
}

// sparkReadMeta is json4s' read of OffsetSeqMetadata: exact field names,
// missing fields take the case class defaults (0, 0, empty map), unknown
// fields are ignored.
func sparkReadMeta(js string) (*sparkMeta, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("metadata is not an object")
	}
	m := &sparkMeta{Conf: map[string]string{}}
	for key, dst := range map[string]any{"batchWatermarkMs": &m.BatchWatermarkMs, "batchTimestampMs": &m.BatchTimestampMs, "conf": &m.Conf} {
		if raw, ok := obj[key]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, err
			}
		}
	}
	if m.Conf == nil {
		m.Conf = map[string]string{}
	}
	return m, nil
}

func sparkReadOffsets(data []byte) (*sparkOffsetSeq, error) {
	lines := sparkLines(data)
	if len(lines) == 0 {
		return nil, errors.New("incomplete log file")
	}
	v, err := sparkVersion(lines[0], 2)
	if err != nil {
		return nil, err
	}
	if len(lines) < 2 {
		return nil, errors.New("no metadata line") // lines.next() on an empty iterator
	}
	s := &sparkOffsetSeq{Version: v}
	if md := javaTrim(lines[1]); md != "" {
		m, err := sparkReadMeta(md)
		if err != nil {
			return nil, err
		}
		s.Metadata = m
	}
	for _, line := range lines[2:] {
		key := ""
		if v == 2 {
			i := strings.IndexByte(line, ':')
			if i < 0 {
				return nil, fmt.Errorf("invalid OffsetMap format: %s", line)
			}
			key, line = line[:i], line[i+1:]
		}
		if line == "-" {
			line = ""
		}
		s.Keys = append(s.Keys, key)
		s.Offsets = append(s.Offsets, line)
	}
	return s, nil
}

// sparkWriteOffsets is OffsetSeqLog.serialize given the metadata JSON and
// the offsets ("" = None; V2 with keys).
func sparkWriteOffsets(version int, meta string, keys, offsets []string) []byte {
	var b bytes.Buffer
	b.WriteString("v" + strconv.Itoa(version))
	b.WriteByte('\n')
	b.WriteString(meta)
	for i, o := range offsets {
		b.WriteByte('\n')
		if version == 2 {
			b.WriteString(keys[i])
			b.WriteByte(':')
		}
		if o == "" {
			o = "-"
		}
		b.WriteString(o)
	}
	return b.Bytes()
}

// sparkReadCommit is CommitLog.readCommitMetadata for v1.
func sparkReadCommit(data []byte) (int64, error) {
	lines := sparkLines(data)
	if len(lines) == 0 {
		return 0, errors.New("incomplete log file in the offset commit log")
	}
	if _, err := sparkVersion(javaTrim(lines[0]), 1); err != nil {
		return 0, err
	}
	js := "{}"
	if len(lines) > 1 {
		js = lines[1]
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &obj); err != nil {
		return 0, err
	}
	var next int64
	if raw, ok := obj["nextBatchWatermarkMs"]; ok {
		if err := json.Unmarshal(raw, &next); err != nil {
			return 0, err
		}
	}
	return next, nil
}

// sparkWriteCommit is CommitLog.serialize for v1.
func sparkWriteCommit(next int64) []byte {
	return []byte("v1\n" + `{"nextBatchWatermarkMs":` + strconv.FormatInt(next, 10) + "}")
}

// compactOr returns s compacted when it is JSON, else s.
func compactOr(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}
