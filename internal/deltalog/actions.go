package deltalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
)

// Protocol is the protocol Action: the reader and writer versions a client
// needs to understand the table.
type Protocol struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Format is metaData.format.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the metaData Action. A later one replaces the earlier one whole.
type Metadata struct {
	ID               string            `json:"id"`
	Name             *string           `json:"name,omitempty"`
	Description      *string           `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
}

// AddFile is the add Action: a live data file.
type AddFile struct {
	Path             string             `json:"path"`
	PartitionValues  map[string]*string `json:"partitionValues"`
	Size             int64              `json:"size"`
	ModificationTime int64              `json:"modificationTime"`
	DataChange       bool               `json:"dataChange"`
	Stats            string             `json:"stats,omitempty"`
	Tags             map[string]*string `json:"tags,omitempty"`
	DeletionVector   json.RawMessage    `json:"deletionVector,omitempty"`
	BaseRowID        *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommit *int64             `json:"defaultRowCommitVersion,omitempty"`
}

// RemoveFile is the remove Action: a tombstone kept for VACUUM.
type RemoveFile struct {
	Path                 string             `json:"path"`
	DeletionTimestamp    *int64             `json:"deletionTimestamp,omitempty"`
	DataChange           bool               `json:"dataChange"`
	ExtendedFileMetadata *bool              `json:"extendedFileMetadata,omitempty"`
	PartitionValues      map[string]*string `json:"partitionValues,omitempty"`
	Size                 *int64             `json:"size,omitempty"`
	Stats                string             `json:"stats,omitempty"`
	Tags                 map[string]*string `json:"tags,omitempty"`
	DeletionVector       json.RawMessage    `json:"deletionVector,omitempty"`
}

// Txn is the txn (set transaction) Action: the last batch an application
// committed, used to make streaming writes idempotent.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// CommitInfo is the commitInfo Action (free-form provenance). Version is
// filled in by History from the commit's file name; it is not in the JSON.
type CommitInfo struct {
	Version             int64          `json:"-"`
	Timestamp           int64          `json:"timestamp"`
	Operation           string         `json:"operation,omitempty"`
	OperationParameters map[string]any `json:"operationParameters,omitempty"`
	ReadVersion         *int64         `json:"readVersion,omitempty"`
	IsolationLevel      string         `json:"isolationLevel,omitempty"`
	IsBlindAppend       *bool          `json:"isBlindAppend,omitempty"`
	OperationMetrics    map[string]any `json:"operationMetrics,omitempty"`
	EngineInfo          string         `json:"engineInfo,omitempty"`
	TxnID               string         `json:"txnId,omitempty"`
}

// Action is one line of a commit file. Exactly one field is set; actions we
// do not use (cdc, domainMetadata, ...) leave all of them nil and are skipped.
type Action struct {
	Txn        *Txn        `json:"txn,omitempty"`
	Add        *AddFile    `json:"add,omitempty"`
	Remove     *RemoveFile `json:"remove,omitempty"`
	MetaData   *Metadata   `json:"metaData,omitempty"`
	Protocol   *Protocol   `json:"protocol,omitempty"`
	CommitInfo *CommitInfo `json:"commitInfo,omitempty"`
}

// ParseActions parses newline-delimited JSON actions. Blank lines are
// skipped (a trailing newline is common); anything else that is not a JSON
// object with valid known actions is an error naming the line.
func ParseActions(data []byte) ([]Action, error) {
	var out []Action
	line := 0
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			l, data = data, nil
		}
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		if l[0] != '{' {
			return nil, fmt.Errorf("line %d: not a JSON object", line)
		}
		var a Action
		if err := json.Unmarshal(l, &a); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Validate checks that a holds at most one action, each well formed.
func (a *Action) Validate() error {
	n := 0
	if a.Txn != nil {
		n++
		if a.Txn.AppID == "" {
			return fmt.Errorf("txn without appId")
		}
	}
	if a.Add != nil {
		n++
		if a.Add.Path == "" {
			return fmt.Errorf("add without path")
		}
		if _, err := url.PathUnescape(a.Add.Path); err != nil {
			return fmt.Errorf("add path %q: %w", a.Add.Path, err)
		}
	}
	if a.Remove != nil {
		n++
		if a.Remove.Path == "" {
			return fmt.Errorf("remove without path")
		}
		if _, err := url.PathUnescape(a.Remove.Path); err != nil {
			return fmt.Errorf("remove path %q: %w", a.Remove.Path, err)
		}
	}
	if a.MetaData != nil {
		n++
		if a.MetaData.SchemaString != "" {
			if _, err := ParseSchema(a.MetaData.SchemaString); err != nil {
				return fmt.Errorf("metaData schemaString: %w", err)
			}
		}
	}
	if a.Protocol != nil {
		n++
	}
	if a.CommitInfo != nil {
		n++
	}
	if n > 1 {
		return fmt.Errorf("line holds %d actions, want one", n)
	}
	return nil
}

// DecodePath percent-decodes a log path once (RFC 2396 relative URI).
func DecodePath(p string) string {
	d, err := url.PathUnescape(p)
	if err != nil {
		return p // validated at parse time; unreachable for parsed actions
	}
	return d
}
