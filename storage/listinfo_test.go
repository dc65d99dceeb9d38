package storage

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/storage/s3test"
)

// TestListInfo lists a prefix of 23 objects and two sub-prefixes in pages of
// 10 keys: ListInfo returns what List plus a Stat per name returns (sizes,
// kinds, modification times), from three LIST requests and no HEAD.
func TestListInfo(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		s, counts := s.Counting(t)
		fs, root := openFS(t, s, "t")
		for _, b := range fs.(*Mux).buckets {
			b.listPage = 10
		}
		pub := durable.For(fs)
		for i := range 23 {
			if _, err := durable.Bytes(pub, root, fmt.Sprintf("part-%02d.parquet", i), durable.Options{}, make([]byte, i*7)); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range []string{"date=a", "_delta_log"} {
			if _, err := durable.Bytes(pub, fs.PathJoin(root, d), "x", durable.Options{}, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		counts.Reset()
		infos, err := ListInfo(fs, root, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l, h := counts.Get("LIST"), counts.Get("HEAD"); l != 3 || h != 0 {
			t.Fatalf("ListInfo of 25 entries in pages of 10 made %d LISTs and %d HEADs, want 3 and 0", l, h)
		}
		names, err := fs.List(root)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]vfs.FileInfo{}
		for _, fi := range infos {
			got[fi.Name()] = fi
		}
		if len(infos) != len(names) || len(got) != 25 {
			t.Fatalf("ListInfo gave %d entries, List %d names", len(infos), len(names))
		}
		sort.Strings(names)
		for _, n := range names {
			fi, ok := got[n]
			if !ok {
				t.Fatalf("ListInfo lacks %s", n)
			}
			st, err := fs.Stat(fs.PathJoin(root, n))
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() != st.IsDir() || fi.Size() != st.Size() {
				t.Fatalf("%s: ListInfo dir=%v size=%d, Stat dir=%v size=%d", n, fi.IsDir(), fi.Size(), st.IsDir(), st.Size())
			}
			if !st.IsDir() && (fi.ModTime().IsZero() || fi.ModTime().Sub(st.ModTime()).Abs() > time.Second) {
				t.Fatalf("%s: ListInfo mtime %v, Stat %v", n, fi.ModTime(), st.ModTime())
			}
		}
		// A match filters without more requests.
		counts.Reset()
		some, err := ListInfo(fs, root, func(n string) bool { return strings.HasPrefix(n, "part-1") })
		if err != nil || len(some) != 10 || counts.Get("LIST") != 3 || counts.Get("HEAD") != 0 {
			t.Fatalf("matched %d entries (%v), %d LISTs, %d HEADs", len(some), err, counts.Get("LIST"), counts.Get("HEAD"))
		}
		// A missing prefix lists nothing.
		if infos, err := ListInfo(fs, fs.PathJoin(root, "nope"), nil); err != nil || len(infos) != 0 {
			t.Fatalf("missing prefix: %v %v", infos, err)
		}
	})
}

// TestListInfoLocal: on an FS without a LIST (here the in-memory one) it
// is List then Stat.
func TestListInfoLocal(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/t/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	f, _ := fs.Create("/t/a", vfs.WriteCategoryUnspecified)
	f.Write([]byte("abc"))
	f.Close()
	infos, err := ListInfo(fs, "/t", nil)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	if len(infos) != 2 || infos[0].Name() != "a" || infos[0].Size() != 3 || infos[0].IsDir() || infos[1].Name() != "sub" || !infos[1].IsDir() {
		t.Fatalf("infos %v", infos)
	}
}
