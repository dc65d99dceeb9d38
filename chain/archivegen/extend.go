package archivegen

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
)

// An extension (ethnode.Extend, `ethstream archive extend`) adds files to
// several directories (blocks and each table, one per date) and rewrites
// manifest.json. No single rename publishes them together, so it is made
// crash-safe by a stage and a journal, in this order:
//
//  1. Stage: every new file is published (package durable) at
//     DIR/_extend/<key>, a directory no reader lists (a name starting with
//     "_" is not data, as in Spark's file source; the tables are under
//     DIR/v1.0/).
//  2. Journal: DIR/_extend/extension.json is published (durable, Replace):
//     the extension's first new block and its complete manifest, checked as
//     ReadManifest checks. This is the commit point: before it the
//     extension did not happen (the next extension deletes the stage and
//     starts over); from it on, the extension completes.
//  3. Move: each staged file is renamed to DIR/<key>, the blocks files first,
//     then each table's, in block order, each target directory fsynced.
//  4. Manifest: manifest.json is published (durable, Replace) as the
//     journal's manifest.
//  5. Clean: DIR/_extend is removed and DIR fsynced.
//
// Steps 3-5 are idempotent (a file already moved is found at its key), so
// the next `archive extend` completes a journal it finds before anything
// else. What a crash leaves, for a reader of manifest.json: the manifest
// before, until step 4, then the one after. For a lister of the data files
// (the s3archive source): before's files until the first move of step 3,
// after's once the moves are done; between the first and the last move
// (renames, no encoding) before's plus a prefix of the extension's files,
// each complete and each one the finished extension has, never a file of
// another extension. Without the stage, a crash while encoding left part
// files no manifest named, and a second run with another --blocks wrote
// files over the same blocks beside them.
//
// Journal format (version 1), one JSON object:
//
//	{"version":1,"firstBlock":26086570,"manifest":{...manifest.json's object...}}
//
// A journal of another version is ARCHIVE_MANIFEST_CORRUPT, so a newer
// format is never half-understood.

// StageDir is the stage of an extension in progress, under the archive root.
const StageDir = "_extend"

const (
	journalName    = "extension.json"
	journalVersion = 1
)

// Extension is an extension's journal: the first block it adds and the
// archive's manifest once it is done.
type Extension struct {
	Version    int       `json:"version"`
	FirstBlock uint64    `json:"firstBlock"`
	Manifest   *Manifest `json:"manifest"`
}

// Blocks is the number of blocks the extension adds.
func (e *Extension) Blocks() int { return int(e.Manifest.LastBlock - e.FirstBlock + 1) }

// StageRoot is the directory an extension of the archive at dir stages its
// files under, each at its key.
func StageRoot(dir string) string { return filepath.Join(dir, StageDir) }

// newFiles are the keys of the files the extension adds, in the order they
// are moved: the blocks files, then each table's (by name), in block order.
func (e *Extension) newFiles() []string {
	var keys []string
	add := func(files []ManifestFile) {
		for _, f := range files {
			if f.FirstBlock >= e.FirstBlock {
				keys = append(keys, f.Key)
			}
		}
	}
	add(e.Manifest.Files)
	names := make([]string, 0, len(e.Manifest.Tables))
	for n := range e.Manifest.Tables {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		add(e.Manifest.Tables[n].Files)
	}
	return keys
}

// PendingExtension returns the journal of an extension of the archive at dir
// that a crash interrupted after its commit point, nil if there is none. A
// stage without a journal (a crash while staging) is deleted: that
// extension never happened.
func PendingExtension(fs vfs.FS, dir string) (*Extension, error) {
	stage := StageRoot(dir)
	path := filepath.Join(stage, journalName)
	b, err := readFileFS(fs, path)
	if errors.Is(err, os.ErrNotExist) {
		if err := fs.RemoveAll(stage); err != nil {
			return nil, errcode.Wrap(err, CodeOutputUnwritable, stage, "check the archive directory's permissions", "remove an interrupted extension's stage")
		}
		return nil, nil
	}
	if err != nil {
		return nil, errcode.Wrap(err, CodeOutputUnwritable, path, "check the archive directory's permissions", "read the extension journal")
	}
	var e Extension
	if err := json.Unmarshal(b, &e); err != nil || e.Version != journalVersion || e.Manifest == nil {
		if err == nil {
			err = fmt.Errorf("version %d (this build reads %d)", e.Version, journalVersion)
		}
		return nil, errcode.Wrap(err, CodeManifestCorrupt, path, "regenerate the archive with `ethstream gen-archive`", "invalid extension journal")
	}
	mb, err := encodeManifest(e.Manifest)
	if err == nil {
		_, err = parseManifest(mb)
	}
	if err == nil && (e.FirstBlock <= e.Manifest.FirstBlock || e.FirstBlock > e.Manifest.LastBlock) {
		err = fmt.Errorf("first new block %d outside the manifest's %d..%d", e.FirstBlock, e.Manifest.FirstBlock, e.Manifest.LastBlock)
	}
	if err != nil {
		return nil, errcode.Wrap(err, CodeManifestCorrupt, path, "regenerate the archive with `ethstream gen-archive`", "invalid extension journal")
	}
	return &e, nil
}

// CommitExtension publishes e's journal, the files it adds being staged
// under StageRoot(dir) (each durable, its directory synced), then completes
// it (CompleteExtension). A manifest no reader accepts is refused before
// the journal is written.
func CommitExtension(fs vfs.FS, dir string, e *Extension) error {
	e.Version = journalVersion
	mb, err := encodeManifest(e.Manifest)
	if err == nil {
		_, err = parseManifest(mb)
	}
	if err != nil {
		return errcode.Wrap(err, errcode.Internal, dir, "report this as a bug", "the extended manifest is one no reader accepts")
	}
	jb, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode extension journal: %w", err)
	}
	stage := StageRoot(dir)
	if _, err := durable.Bytes(durable.For(fs), stage, journalName, durable.Options{Mode: durable.Replace}, append(jb, '\n')); err != nil {
		return errcode.Wrap(err, CodeOutputUnwritable, filepath.Join(stage, journalName), "check free space and permissions of the archive directory", "write the extension journal")
	}
	return CompleteExtension(fs, dir, e)
}

// CompleteExtension moves e's staged files to their keys, publishes its
// manifest and removes the stage (steps 3-5 above). It is idempotent: a
// file already moved is found at its key.
func CompleteExtension(fs vfs.FS, dir string, e *Extension) error {
	stage := StageRoot(dir)
	for _, key := range e.newFiles() {
		src := filepath.Join(stage, filepath.FromSlash(key))
		dst := filepath.Join(dir, filepath.FromSlash(key))
		if _, err := fs.Stat(src); errors.Is(err, os.ErrNotExist) {
			if _, err := fs.Stat(dst); err != nil {
				return errcode.Wrap(err, CodeManifestCorrupt, dst, "regenerate the archive with `ethstream gen-archive`",
					"the interrupted extension's file is neither staged nor in place")
			}
			continue
		}
		if err := durable.Move(fs, src, dst); err != nil {
			return errcode.Wrap(err, CodeOutputUnwritable, dst, "check free space and permissions of the archive directory", "move a staged archive file")
		}
	}
	mb, err := encodeManifest(e.Manifest)
	if err != nil {
		return err
	}
	if _, err := durable.Bytes(durable.For(fs), dir, ManifestName, durable.Options{Mode: durable.Replace}, mb); err != nil {
		return errcode.Wrap(err, CodeOutputUnwritable, filepath.Join(dir, ManifestName), "check free space and permissions of the archive directory", "write manifest")
	}
	if err := fs.RemoveAll(stage); err != nil {
		return errcode.Wrap(err, CodeOutputUnwritable, stage, "check the archive directory's permissions", "remove the extension's stage")
	}
	if err := durable.SyncDir(fs, dir); err != nil {
		return errcode.Wrap(err, CodeOutputUnwritable, dir, "check the archive directory's permissions", "sync archive directory")
	}
	return nil
}

// DataFiles lists the archive's data files as a file source lists them:
// each table's tree under dir, names starting with "_" or "." and files not
// ending in ".parquet" skipped, as keys, sorted. It is what a reader that
// does not read the manifest sees.
func DataFiles(fs vfs.FS, dir string) ([]string, error) {
	var keys []string
	var walk func(rel string) error
	walk = func(rel string) error {
		names, err := fs.List(filepath.Join(dir, filepath.FromSlash(rel)))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, n := range names {
			if n == "" || n[0] == '_' || n[0] == '.' {
				continue
			}
			k := rel + "/" + n
			st, err := fs.Stat(filepath.Join(dir, filepath.FromSlash(k)))
			if err != nil {
				return err
			}
			if st.IsDir() {
				if err := walk(k); err != nil {
					return err
				}
			} else if filepath.Ext(n) == ".parquet" {
				keys = append(keys, k)
			}
		}
		return nil
	}
	for _, t := range Tables {
		if err := walk(TablePrefix(t)); err != nil {
			return nil, err
		}
	}
	slices.Sort(keys)
	return keys, nil
}
