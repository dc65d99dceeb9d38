package archivegen

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethstream/ethstream/errcode"
)

// Error codes of the archive writer, and the archive's fixed names.
const (
	CodeArchiveNotFound  = "ARCHIVE_NOT_FOUND"
	CodeManifestCorrupt  = "ARCHIVE_MANIFEST_CORRUPT"
	CodeOutputUnwritable = "ARCHIVE_OUTPUT_UNWRITABLE"
	CodeOutputNotEmpty   = "ARCHIVE_OUTPUT_NOT_EMPTY"
	ManifestName         = "manifest.json"
	ManifestVersion      = 1
	// BlocksPrefix is the key prefix of the blocks table, as in the AWS dataset.
	BlocksPrefix = "v1.0/eth/blocks"
)

// Manifest describes a generated archive; it is Out/manifest.json (format in
// doc.go). It is written last, so its presence means the archive is complete.
type Manifest struct {
	Version         int            `json:"version"`
	Preset          string         `json:"preset"`
	Seed            int64          `json:"seed"`
	FirstDay        string         `json:"firstDay"`
	Days            int            `json:"days"`
	FirstBlock      uint64         `json:"firstBlock"`
	LastBlock       uint64         `json:"lastBlock"`
	FirstParentHash string         `json:"firstParentHash"`
	LastHash        string         `json:"lastHash"`
	LastTimestamp   int64          `json:"lastTimestamp"` // unix seconds of the last block
	Rows            int64          `json:"rows"`
	Bytes           int64          `json:"bytes"`
	Files           []ManifestFile `json:"files"`
	// LastHeader is the archive's last header in go-ethereum's JSON form, so
	// the node can continue the chain (base fee, gas limit) without
	// regenerating history.
	LastHeader *types.Header `json:"lastHeader"`
	// Tables are the archive's other tables (transactions, logs,
	// token_transfers) when gen-archive wrote them, by name; absent for a
	// blocks-only archive. A table's files are one per blocks file, over
	// the same blocks.
	Tables map[string]ManifestTable `json:"tables,omitempty"`
}

// ManifestTable is one table of the archive besides blocks.
type ManifestTable struct {
	Rows  int64          `json:"rows"`
	Bytes int64          `json:"bytes"`
	Files []ManifestFile `json:"files"` // Rows of a file are the table's rows
}

// ManifestFile is one Parquet file of the archive.
type ManifestFile struct {
	Key        string `json:"key"` // path relative to the archive root, '/'-separated
	Date       string `json:"date"`
	Rows       int64  `json:"rows"`
	Bytes      int64  `json:"bytes"`
	FirstBlock uint64 `json:"firstBlock"`
	LastBlock  uint64 `json:"lastBlock"`
}

// GenRemedy is the remedy for a missing archive.
const GenRemedy = "run `ethstream gen-archive --out DIR` first (or pass the directory gen-archive wrote)"

// ReadManifest reads and validates dir/manifest.json. A missing archive or
// manifest is ARCHIVE_NOT_FOUND; an unparsable, inconsistent or
// future-versioned one is ARCHIVE_MANIFEST_CORRUPT. Both name the path.
func ReadManifest(dir string) (*Manifest, error) { return ReadManifestFS(vfs.Default, dir) }

// ReadManifestFS is ReadManifest on fs.
func ReadManifestFS(fs vfs.FS, dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestName)
	b, err := readFileFS(fs, path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errcode.Wrap(err, CodeArchiveNotFound, path, GenRemedy, "no archive manifest")
	}
	if err != nil {
		return nil, errcode.Wrap(err, CodeArchiveNotFound, path, GenRemedy, "read archive manifest")
	}
	m, err := parseManifest(b)
	if err != nil {
		return nil, errcode.Wrap(err, CodeManifestCorrupt, path, "regenerate the archive with `ethstream gen-archive`", "invalid archive manifest")
	}
	return m, nil
}

// parseManifest decodes and checks a manifest's internal consistency.
func parseManifest(b []byte) (*Manifest, error) {
	var probe struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("parse json: %w", err)
	}
	if probe.Version == nil {
		return nil, errors.New("missing version")
	}
	if *probe.Version != ManifestVersion {
		return nil, fmt.Errorf("unsupported manifest version %d (this build reads %d)", *probe.Version, ManifestVersion)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse json: %w", err)
	}
	if m.FirstBlock == 0 || m.LastBlock < m.FirstBlock {
		return nil, fmt.Errorf("bad block range %d..%d", m.FirstBlock, m.LastBlock)
	}
	if m.Rows != int64(m.LastBlock-m.FirstBlock+1) {
		return nil, fmt.Errorf("rows %d do not match block range %d..%d", m.Rows, m.FirstBlock, m.LastBlock)
	}
	var rows int64
	next := m.FirstBlock
	for _, f := range m.Files {
		if f.FirstBlock != next || f.LastBlock < f.FirstBlock || f.Rows != int64(f.LastBlock-f.FirstBlock+1) {
			return nil, fmt.Errorf("file %q has block range %d..%d (%d rows), expected to start at %d", f.Key, f.FirstBlock, f.LastBlock, f.Rows, next)
		}
		if !filepath.IsLocal(filepath.FromSlash(f.Key)) {
			return nil, fmt.Errorf("file key %q escapes the archive", f.Key)
		}
		next = f.LastBlock + 1
		rows += f.Rows
	}
	if rows != m.Rows {
		return nil, fmt.Errorf("files hold %d rows, manifest says %d", rows, m.Rows)
	}
	for name, t := range m.Tables {
		if err := checkTable(&m, name, t); err != nil {
			return nil, err
		}
	}
	if !isHash(m.LastHash) || !isHash(m.FirstParentHash) {
		return nil, errors.New("lastHash and firstParentHash must be 0x-prefixed 32-byte hex")
	}
	if m.LastHeader == nil || m.LastHeader.Number == nil {
		return nil, errors.New("missing lastHeader")
	}
	if m.LastHeader.Number.Uint64() != m.LastBlock || m.LastHeader.Hash().Hex() != m.LastHash {
		return nil, fmt.Errorf("lastHeader (block %v, hash %s) does not match lastBlock %d / lastHash %s",
			m.LastHeader.Number, m.LastHeader.Hash().Hex(), m.LastBlock, m.LastHash)
	}
	if int64(m.LastHeader.Time) != m.LastTimestamp {
		return nil, fmt.Errorf("lastHeader time %d does not match lastTimestamp %d", m.LastHeader.Time, m.LastTimestamp)
	}
	return &m, nil
}

// checkTable checks a table's files against the blocks files: one per
// blocks file, over the same blocks, local keys, rows adding up.
func checkTable(m *Manifest, name string, t ManifestTable) error {
	if name == TableBlocks || !slices.Contains(Tables, name) {
		return fmt.Errorf("unknown table %q", name)
	}
	if len(t.Files) != len(m.Files) {
		return fmt.Errorf("table %s has %d files, blocks %d", name, len(t.Files), len(m.Files))
	}
	var rows int64
	for i, f := range t.Files {
		b := m.Files[i]
		if f.FirstBlock != b.FirstBlock || f.LastBlock != b.LastBlock || f.Date != b.Date || f.Rows < 0 {
			return fmt.Errorf("table %s file %q covers blocks %d..%d of %s, blocks file %d..%d of %s", name, f.Key, f.FirstBlock, f.LastBlock, f.Date, b.FirstBlock, b.LastBlock, b.Date)
		}
		if !filepath.IsLocal(filepath.FromSlash(f.Key)) {
			return fmt.Errorf("file key %q escapes the archive", f.Key)
		}
		rows += f.Rows
	}
	if rows != t.Rows {
		return fmt.Errorf("table %s files hold %d rows, manifest says %d", name, rows, t.Rows)
	}
	return nil
}

// readFileFS is os.ReadFile on fs.
func readFileFS(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	return b, errors.Join(err, f.Close())
}

func isHash(s string) bool {
	if len(s) != 66 || s[:2] != "0x" {
		return false
	}
	_, err := hex.DecodeString(s[2:])
	return err == nil
}
