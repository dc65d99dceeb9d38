package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/storage/s3serve"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cli runs the CLI in-process as a user would type it, with every flag of
// the command tree reset to its default first (cobra keeps flag values,
// repeatable ones included, between executions).
func cli(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var reset func(c *cobra.Command)
	reset = func(c *cobra.Command) {
		fl := func(f *pflag.Flag) {
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				_ = sv.Replace(nil)
			} else {
				_ = f.Value.Set(f.DefValue)
			}
			f.Changed = false
		}
		c.Flags().VisitAll(fl)
		c.PersistentFlags().VisitAll(fl)
		for _, sub := range c.Commands() {
			reset(sub)
		}
	}
	reset(rootCmd)
	var out, errOut bytes.Buffer
	code = execute(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustCLI is cli for a command that must succeed: its stdout.
func mustCLI(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	code, out, errOut := cli(t, ctx, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	return out
}

// archiveDir is removed by TestMain once generated.
var archiveDir string

// testArchive is a one-day generated archive, ARCHIVE/archive (shared by the tests of the
// package: generating it takes a fraction of a second, but once is enough).
var testArchive = sync.OnceValues(func() (string, error) {
	base, err := os.MkdirTemp("", "ethstream-cmd-archive-")
	if err != nil {
		return "", err
	}
	archiveDir = base
	// base is also the root served as S3: its one folder is bucket "archive".
	dir := filepath.Join(base, "archive")
	_, err = archivegen.Generate(context.Background(), archivegen.Options{Out: dir, Preset: chain.LastDaysPreset(1), Seed: 4, Workers: 1})
	return dir, err
})

// testFileLimit is the open-file limit (soft and hard) of this test binary:
// low enough that partition counts beyond it are refused whatever the
// machine's own limit, high enough for every test here.
const testFileLimit = 8192

func TestMain(m *testing.M) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err == nil && r.Max > testFileLimit {
		r.Cur, r.Max = testFileLimit, testFileLimit
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	if archiveDir != "" {
		os.RemoveAll(archiveDir)
	}
	if binDir != "" { // the binary the process tests built (binary_test.go)
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// archiveURI is the file:// URI of the test archive's blocks.
func archiveURI(t *testing.T) (root, uri string) {
	t.Helper()
	dir, err := testArchive()
	if err != nil {
		t.Fatal(err)
	}
	return dir, "file://" + filepath.Join(dir, "v1.0", "eth", "blocks")
}

// startS3 serves the test archive's parent over loopback S3: bucket "archive".
func startS3(t *testing.T) string {
	t.Helper()
	dir, _ := archiveURI(t)
	srv, err := s3serve.Start(context.Background(), s3serve.Options{Root: filepath.Dir(dir), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.URL()
}

// startNode serves the test archive's continuation over loopback JSON-RPC.
func startNode(t *testing.T) string {
	t.Helper()
	root, _ := archiveURI(t)
	m, err := archivegen.ReadManifest(root)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ethnode.Start(context.Background(), ethnode.Options{Manifest: m, Addr: "127.0.0.1:0", InitialBlocks: 4, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n.URL()
}

// treeHash hashes every path, mode and content under dir; "" if dir does
// not exist.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return ""
	}
	h := sha256.New()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		info, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		h.Write([]byte(rel + "\x00" + info.Mode().String() + "\x00"))
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			h.Write(b)
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
