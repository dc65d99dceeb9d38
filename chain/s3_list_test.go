package chain

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
