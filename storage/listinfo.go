package storage

import (
	"errors"
	"os"
	"path"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// infoLister is a vfs.FS that lists a directory with each entry's info.
type infoLister interface {
	ListInfo(dir string, match func(name string) bool) ([]vfs.FileInfo, error)
}

// ListInfo returns the entries directly under dir whose names match (nil:
// all) with their size, modification time and kind, as List followed by a
// Stat of each matching name would. On S3 they come from the LIST responses themselves (ListObjectsV2
// carries each object's Size and LastModified; a common prefix is a
// directory), so a directory of n objects costs one request per page of
// up to 1,000 instead of one HEAD per object. On any other FS it is List
// then Stat of each match; a name removed between the two is left out.
// Order is List's.
func ListInfo(fs vfs.FS, dir string, match func(name string) bool) ([]vfs.FileInfo, error) {
	if l, ok := fs.(infoLister); ok {
		return l.ListInfo(dir, match)
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	out := make([]vfs.FileInfo, 0, len(names))
	for _, name := range names {
		if match != nil && !match(name) {
			continue
		}
		info, err := fs.Stat(fs.PathJoin(dir, name))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		out = append(out, namedInfo{info, name})
	}
	return out, nil
}

// namedInfo is a FileInfo whose Name is the listed name (Stat of some
// FSes names the whole path).
type namedInfo struct {
	vfs.FileInfo
	name string
}

func (n namedInfo) Name() string { return n.name }

// ListInfo implements ListInfo for the store of dir.
func (m *Mux) ListInfo(dir string, match func(name string) bool) ([]vfs.FileInfo, error) {
	fs, err := m.route(dir)
	if err != nil {
		return nil, err
	}
	return ListInfo(fs, dir, match)
}

// ListInfo lists dir's objects and sub-prefixes with the info the LIST
// response carries: no HEAD per object.
func (b *bucketFS) ListInfo(dir string, match func(name string) bool) ([]vfs.FileInfo, error) {
	prefix := b.key(dir)
	if prefix != "" {
		prefix += "/"
	}
	var out []vfs.FileInfo
	err := b.obj.List(b.ctx, prefix, "/", b.listPage, 0, func(page []ObjectInfo) error {
		for _, o := range page {
			n := strings.TrimPrefix(o.Key, prefix)
			if n == "" || (match != nil && !match(n)) {
				continue
			}
			if o.Dir {
				out = append(out, fileInfo{name: path.Base("/" + n), dir: true})
			} else {
				out = append(out, fileInfo{name: n, size: o.Size, mod: o.ModTime})
			}
		}
		return nil
	})
	return out, err
}
