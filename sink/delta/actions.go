package delta

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ethstream/ethstream/internal/deltalog"
)

// The actions of the log, read and written (internal/deltalog defines them,
// for the Delta source too).
type (
	// Protocol is the protocol action.
	Protocol = deltalog.Protocol
	// Format is metaData.format.
	Format = deltalog.Format
	// Metadata is the metaData action.
	Metadata = deltalog.Metadata
	// AddFile is the add action: a live data file.
	AddFile = deltalog.AddFile
	// RemoveFile is the remove action: a tombstone kept for VACUUM.
	RemoveFile = deltalog.RemoveFile
	// Txn is the txn action: an application's last committed version.
	Txn = deltalog.Txn
	// CommitInfo is the commitInfo action.
	CommitInfo = deltalog.CommitInfo
	action     = deltalog.Action
)

// parseActions parses newline-delimited JSON actions (deltalog.ParseActions).
func parseActions(data []byte) ([]action, error) { return deltalog.ParseActions(data) }

// marshalActions renders actions as a commit file body.
func marshalActions(actions []action) ([]byte, error) {
	var b bytes.Buffer
	for i := range actions {
		line, err := json.Marshal(&actions[i])
		if err != nil {
			return nil, fmt.Errorf("marshal action %d: %w", i, err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// decodePath percent-decodes a log path once (deltalog.DecodePath).
func decodePath(p string) string { return deltalog.DecodePath(p) }
