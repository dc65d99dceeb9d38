package deltasource

import (
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// FuzzParseOffset: any text parses or is refused, never panics; what
// parses renders back (formatOffset) to an offset that parses to the same
// table and position.
func FuzzParseOffset(f *testing.F) {
	for _, s := range []string{`{"sourceVersion":1,"reservoirId":"a","reservoirVersion":3,"index":-1,"isStartingVersion":false}`,
		`{"sourceVersion":3,"reservoirId":"","reservoirVersion":0,"index":7,"isStartingVersion":true}`, `{}`, `null`, `{"index":1e3}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, p, err := parseOffset(stream.Offset(s))
		if err != nil {
			return
		}
		id2, p2, err := parseOffset(formatOffset(id, p))
		if err != nil || id2 != id || p2 != p {
			t.Fatalf("%q: %q %+v -> %q %+v %v", s, id, p, id2, p2, err)
		}
	})
}
