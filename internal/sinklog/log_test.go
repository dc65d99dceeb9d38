package sinklog

import (
	"slices"
	"testing"

	"github.com/ethstream/ethstream/errcode"
)

// TestLogBytes: the log's bytes are Spark's, checked against
// FileStreamSinkLogSuite's serialize/deserialize example.
func TestLogBytes(t *testing.T) {
	spark := "v1\n" +
		`{"path":"/a/b/x","size":100,"isDir":false,"modificationTime":1000,"blockReplication":1,"blockSize":10000,"action":"add"}` + "\n" +
		`{"path":"/a/b/y","size":200,"isDir":false,"modificationTime":2000,"blockReplication":2,"blockSize":20000,"action":"delete"}` + "\n" +
		`{"path":"/a/b/z","size":300,"isDir":false,"modificationTime":3000,"blockReplication":3,"blockSize":30000,"action":"add"}`
	entries := []FileStatus{
		{Path: "/a/b/x", Size: 100, ModificationTime: 1000, BlockReplication: 1, BlockSize: 10000, Action: ActionAdd},
		{Path: "/a/b/y", Size: 200, ModificationTime: 2000, BlockReplication: 2, BlockSize: 20000, Action: ActionDelete},
		{Path: "/a/b/z", Size: 300, ModificationTime: 3000, BlockReplication: 3, BlockSize: 30000, Action: ActionAdd},
	}
	if got := string(EncodeLog(entries)); got != spark {
		t.Fatalf("encoded\n%s\nwant\n%s", got, spark)
	}
	if got := string(EncodeLog(nil)); got != "v1" {
		t.Fatalf("empty log %q", got)
	}
	parsed, err := ParseLog("x", []byte(spark))
	if err != nil || !slices.Equal(parsed, entries) {
		t.Fatalf("parsed %+v, %v", parsed, err)
	}
	if got := Compact(parsed); len(got) != 2 || got[0].Path != "/a/b/x" || got[1].Path != "/a/b/z" {
		t.Fatalf("compact %+v", got)
	}
	for _, bad := range []string{"", "v2", "v1\n{", "v1\n{\"path\":\"p\",\"size\":1}", "v1\n{\"path\":\"p\",\"size\":1,\"action\":\"mv\"}"} {
		if _, err := ParseLog("x", []byte(bad)); !errcode.Is(err, errcode.CheckpointCorrupt) {
			t.Errorf("ParseLog(%q) = %v, want CHECKPOINT_CORRUPT", bad, err)
		}
	}
}
