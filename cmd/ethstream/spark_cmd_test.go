package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/ethstream/ethstream/internal/fixture"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// resetFlags gives every command of the tree its default flag values again:
// cobra keeps them (repeatable ones append) between executions.
func resetFlags(c *cobra.Command) {
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			_ = sv.Replace(nil)
		} else {
			_ = f.Value.Set(f.DefValue)
		}
		f.Changed = false
	})
	for _, sub := range c.Commands() {
		resetFlags(sub)
	}
}

// treeDigest lists every file and directory under dir with a hash of its bytes.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			lines = append(lines, rel+"/")
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %x", rel, sha256.Sum256(data)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSparkCheckpointCommands runs the CLI on copies of the checkpoints
// Spark wrote (testdata/spark_checkpoints): inspect and plan read them, run
// and checkpoint repartition refuse them before writing anything.
func TestSparkCheckpointCommands(t *testing.T) {
	sparkFixtures := fixture.Shared(t, "spark-checkpoints")
	tmp := t.TempDir()
	digests := map[string]string{}
	datadriven.RunTest(t, "testdata/spark_checkpoints", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "copy":
			var name string
			d.ScanArgs(t, "fixture", &name)
			dst := filepath.Join(tmp, name)
			copyTree(t, filepath.Join(sparkFixtures, name), dst)
			digests[name] = treeDigest(t, dst)
			return ""
		case "ethstream":
			args := strings.Fields(strings.ReplaceAll(d.Input, "TMP", tmp))
			resetFlags(rootCmd)
			var out, errOut bytes.Buffer
			code := execute(context.Background(), args, &out, &errOut)
			res := strings.ReplaceAll(out.String()+errOut.String(), tmp, "TMP")
			return fmt.Sprintf("%sexit %d\n", res, code)
		case "unchanged":
			var name string
			d.ScanArgs(t, "fixture", &name)
			now := treeDigest(t, filepath.Join(tmp, name))
			if now != digests[name] {
				return "CHANGED:\n" + now + "\n"
			}
			return "byte-identical\n"
		case "exists":
			var p string
			d.ScanArgs(t, "path", &p)
			_, err := os.Stat(strings.ReplaceAll(p, "TMP", tmp))
			return fmt.Sprintln(err == nil)
		case "write":
			var p string
			d.ScanArgs(t, "path", &p)
			p = strings.ReplaceAll(p, "TMP", tmp)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(d.Input), 0o644); err != nil {
				t.Fatal(err)
			}
			return ""
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}
