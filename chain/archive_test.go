package chain

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

func genSmall(t testing.TB, p Preset, seed int64) (string, *Manifest) {
	t.Helper()
	dir := t.TempDir()
	m, err := GenerateArchive(context.Background(), GenOptions{Out: dir, Preset: p, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

func TestGenerateSmall(t *testing.T) {
	start := time.Now()
	dir, m := genSmall(t, LastDaysPreset(2), 7)
	t.Logf("gen %v rows=%d bytes=%d", time.Since(start), m.Rows, m.Bytes)
	if m.LastBlock != LastBlockNumber {
		t.Fatalf("last block %d", m.LastBlock)
	}
	for _, f := range m.Files {
		pf, err := os.Open(filepath.Join(dir, f.Key))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := pf.Stat()
		file, err := parquet.OpenFile(pf, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s rows=%d rg=%d schema=%s", f.Key, file.NumRows(), len(file.RowGroups()), file.Schema())
		pf.Close()
	}
}

// tempDirForPackage is a directory shared by the tests of one binary,
// removed by TestMain.
func tempDirForPackage() (string, error) {
	return os.MkdirTemp(sharedTmp, "archive-")
}
