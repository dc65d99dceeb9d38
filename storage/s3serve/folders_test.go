package s3serve

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestUnservedFolders checks the folders it names are the ones the endpoint
// answers NoSuchBucket for, and the valid ones are served.
func TestUnservedFolders(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"ab", "My_Data", "archive", "aws-public-blockchain", "my.data-1"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, "obj"), []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file-not-folder"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := UnservedFolders(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"My_Data", "ab", "my.data-1"}; !slices.Equal(got, want) {
		t.Fatalf("UnservedFolders = %q, want %q", got, want)
	}
	srv, err := Start(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, d := range []string{"ab", "My_Data", "archive", "aws-public-blockchain", "my.data-1"} {
		resp, err := http.Get(srv.URL() + "/" + d + "/obj")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if served := resp.StatusCode == http.StatusOK; served == slices.Contains(got, d) {
			t.Errorf("folder %s: status %d, named unserved: %v", d, resp.StatusCode, slices.Contains(got, d))
		}
	}
}
