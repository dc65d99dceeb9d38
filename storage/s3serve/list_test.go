package s3serve

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
)

// naiveList is the S3 listing semantics written plainly: every key with the
// prefix, in byte order, keys containing the delimiter after the prefix
// rolled up into their common prefix.
func naiveList(keys []string, prefix, delim string) []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		e := k
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				e = "P:" + k[:len(prefix)+i+len(delim)]
			}
		}
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.TrimPrefix(out[i], "P:") < strings.TrimPrefix(out[j], "P:") })
	return out
}

// TestDirBackendListMatchesNaive pages through random trees with random
// prefixes, delimiters and page sizes and compares with naiveList.
func TestDirBackendListMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 40; iter++ {
		root := t.TempDir()
		os.Mkdir(filepath.Join(root, "bkt"), 0o755)
		var keys []string
		seen := map[string]bool{}
		for i := 0; i < 1+r.IntN(40); i++ {
			var parts []string
			depth := r.IntN(4)
			for j := 0; j < depth; j++ {
				parts = append(parts, "d"+string("ab-="[r.IntN(4)])+fmt.Sprint(r.IntN(3)))
			}
			last := "f" + string("ab-."[r.IntN(4)])
			if r.IntN(2) == 0 {
				last += fmt.Sprint(r.IntN(3)) // else the key may end with the delimiter
			}
			parts = append(parts, last)
			k := strings.Join(parts, "/")
			if seen[k] {
				continue
			}
			seen[k] = true
			keys = append(keys, k)
			p := filepath.Join(root, "bkt", filepath.FromSlash(k))
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(k), 0o644)
		}
		sort.Strings(keys)
		b := &dirBackend{root: root}
		for q := 0; q < 20; q++ {
			prefix := ""
			if r.IntN(3) > 0 {
				k := keys[r.IntN(len(keys))]
				prefix = k[:r.IntN(len(k)+1)]
			}
			delim := []string{"", "/", "-"}[r.IntN(3)]
			maxKeys := int64(1 + r.IntN(5))
			want := naiveList(keys, prefix, delim)
			var got []string
			page := gofakes3.ListBucketPage{MaxKeys: maxKeys}
			if r.IntN(3) == 0 {
				// start-after: keys after it, rolled up as usual.
				sa := keys[r.IntN(len(keys))]
				page.Marker, page.HasMarker = sa, true
				var after []string
				for _, k := range keys {
					if k > sa {
						after = append(after, k)
					}
				}
				want = naiveList(after, prefix, delim)
			}
			for pages := 0; ; pages++ {
				if pages > len(keys)+2 {
					t.Fatal("listing does not terminate")
				}
				p := gofakes3.NewPrefix(&prefix, &delim)
				if delim == "" {
					p = gofakes3.NewPrefix(&prefix, nil)
				}
				res, err := b.ListBucket("bkt", &p, page)
				if err != nil {
					t.Fatal(err)
				}
				var entries []string
				for _, c := range res.Contents {
					entries = append(entries, c.Key)
				}
				for _, c := range res.CommonPrefixes {
					entries = append(entries, "P:"+c.Prefix)
				}
				sort.Slice(entries, func(i, j int) bool {
					return strings.TrimPrefix(entries[i], "P:") < strings.TrimPrefix(entries[j], "P:")
				})
				if int64(len(entries)) > maxKeys {
					t.Fatalf("page of %d entries, max %d", len(entries), maxKeys)
				}
				got = append(got, entries...)
				if !res.IsTruncated {
					break
				}
				page = gofakes3.ListBucketPage{MaxKeys: maxKeys, Marker: res.NextMarker, HasMarker: true}
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("keys %v\nprefix %q delim %q max %d:\n got %v\nwant %v", keys, prefix, delim, maxKeys, got, want)
			}
		}
	}
}

// TestDirBackendListSeesATakeover: a writer moves a lease forward, creating
// generation n+1 and only then deleting n (the checkpoint lease's takeover),
// while listings run. Every listing must show at least one generation: a
// listing is one moment of the directory, and at every moment one exists.
// (It once read the directory, then stat'ed each name and dropped those
// deleted meanwhile: a listing between a takeover's create and delete could
// then show neither, and a second taker started over at generation 0, 2
// takers winning one expired lease.)
func TestDirBackendListSeesATakeover(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "bkt", "ck", ".lock")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gen := func(n int) string { return filepath.Join(dir, fmt.Sprintf("%020d", n)) }
	if err := os.WriteFile(gen(0), []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := os.WriteFile(gen(n+1), []byte("x"), 0o644); err != nil {
				done <- err
				return
			}
			if err := os.Remove(gen(n)); err != nil {
				done <- err
				return
			}
		}
	}()
	b := &dirBackend{root: root}
	prefix := "ck/.lock/"
	p := gofakes3.NewPrefix(&prefix, nil)
	var empty int
	for range 3000 {
		res, err := b.ListBucket("bkt", &p, gofakes3.ListBucketPage{MaxKeys: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Contents) == 0 {
			empty++
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if empty > 0 {
		t.Fatalf("%d of 3000 listings showed no generation", empty)
	}
}
