package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/delta"
)

// bronze -> silver -> gold: the child processes of TestMedallionKill9,
// each one query that never stops on its own, killed by the parent.
const (
	envMedallionStage = "ETHSTREAM_TEST_MEDALLION_STAGE" // silver | gold
	envMedallionRoot  = "ETHSTREAM_TEST_MEDALLION_ROOT"
)

func init() {
	stage := os.Getenv(envMedallionStage)
	if stage == "" {
		return
	}
	// Runs before TestMain: a live query, until SIGKILL.
	cfg := medallionConfig(os.Getenv(envMedallionRoot), stage)
	cfg.Trigger = engine.Trigger{Kind: engine.ProcessingTime, Interval: 0}
	_, err := Run(context.Background(), cfg)
	fmt.Fprintln(os.Stderr, stage, "stopped:", err)
	os.Exit(3)
}

// medallionConfig is one stage's query under root: silver copies the
// bronze Parquet files' rows (a plain SELECT, append mode: Delta blind
// appends); gold reads silver as a Delta source and counts and sums per
// 30-minute window and customer under a 20-minute watermark, in append
// mode (blind appends of closed windows). Both read one file per batch.
func medallionConfig(root, stage string) Config {
	cfg := Config{Checkpoint: filepath.Join(root, stage+"-ckpt"), Table: filepath.Join(root, stage), LocalDir: filepath.Join(root, stage+"-local"),
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		Conf:       map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "2"},
		OutputMode: "append"}
	if stage == "silver" {
		cfg.Sources = []SourceSpec{{Name: "bronze", Format: "parquet", URI: "file://" + filepath.ToSlash(filepath.Join(root, "bronze")) +
			"?maxFilesPerTrigger=1&schema=" + url.QueryEscape("order_id STRING, customer STRING, amount DOUBLE, event_time TIMESTAMP")}}
		cfg.Query = "SELECT order_id, customer, amount, event_time FROM bronze"
		return cfg
	}
	cfg.Sources = []SourceSpec{{Name: "silver", Format: "delta", URI: "file://" + filepath.ToSlash(filepath.Join(root, "silver")) + "?maxFilesPerTrigger=1"}}
	cfg.Query = "SELECT window(event_time, '30 minutes') AS window, customer, count(*) AS orders, sum(amount) AS amount " +
		"FROM silver GROUP BY window(event_time, '30 minutes'), customer"
	cfg.WithWatermark = "event_time, 20 minutes"
	return cfg
}

// TestMedallionKill9: ethstream's own output table feeds a second query
// exactly once through kill -9. Bronze is a directory of Parquet files;
// the silver query appends their rows to a Delta table; the gold query
// reads that table as a Delta source and appends closed windows to
// another. Both run as their own processes, concurrently, each killed with
// SIGKILL after a random time and restarted, many times; then both finish
// in-process (available-now). Silver holds every bronze row exactly once,
// and gold equals a recount of the bronze files.
func TestMedallionKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes many times")
	}
	root := t.TempDir()
	rows := writeOrderFiles(t, filepath.Join(root, "bronze"), 80, 15, 9)
	r := rand.New(rand.NewPCG(9, 9))
	type child struct {
		cmd   *exec.Cmd
		stage string
	}
	start := func(stage string) *child {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), envMedallionStage+"="+stage, envMedallionRoot+"="+root)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return &child{cmd: c, stage: stage}
	}
	kills := map[string]int{}
	commitsAtKill := map[string][]int64{}
	committed := func(stage string) int64 {
		d := checkpoint.Dir{FS: vfs.Default, Path: filepath.Join(root, stage+"-ckpt")}
		ids, _ := d.ListCommits()
		if len(ids) == 0 {
			return -1
		}
		return ids[len(ids)-1]
	}
	for range 30 {
		// Both stages live at once; each is killed at its own moment.
		// A child is killed once its newest commit moved on by one or two
		// batches (or after a few seconds without): a fixed delay let a
		// fast machine finish silver before the second kill.
		before := map[string]int64{"silver": committed("silver"), "gold": committed("gold")}
		live := []*child{start("silver"), start("gold")}
		for _, c := range live {
			want := before[c.stage] + 1 + int64(r.IntN(2))
			for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && committed(c.stage) < want; {
				time.Sleep(2 * time.Millisecond)
			}
			if c.cmd.ProcessState == nil {
				if err := c.cmd.Process.Signal(syscall.SIGKILL); err == nil {
					kills[c.stage]++
				}
			}
			_ = c.cmd.Wait()
			commitsAtKill[c.stage] = append(commitsAtKill[c.stage], committed(c.stage))
		}
	}
	// Both stages made progress under the kills (the test is not vacuous):
	// each was killed many times, with its newest commit advancing.
	for _, stage := range []string{"silver", "gold"} {
		ks := commitsAtKill[stage]
		progressed := 0
		for i := 1; i < len(ks); i++ {
			if ks[i] > ks[i-1] {
				progressed++
			}
		}
		t.Logf("%s: %d kills, newest commit at each: %v", stage, kills[stage], ks)
		if kills[stage] < 20 || progressed < 5 {
			t.Fatalf("%s: %d kills, progress between %d of them: the children did too little to test", stage, kills[stage], progressed)
		}
	}
	for _, stage := range []string{"silver", "gold"} {
		if _, err := Run(context.Background(), medallionConfig(root, stage)); err != nil {
			t.Fatalf("%s after the kills: %v", stage, err)
		}
	}
	// Silver: every bronze row once.
	ctx := context.Background()
	tb, err := delta.Open(ctx, filepath.Join(root, "silver"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tb.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var silver []string
	if err := snap.Rows(ctx, func(row map[string]any) error {
		silver = append(silver, fmt.Sprintf("%s %s %.2f", row["order_id"], row["customer"], row["amount"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var bronze []string
	for _, o := range rows {
		bronze = append(bronze, fmt.Sprintf("%s %s %.2f", o.OrderID, o.Customer, o.Amount))
	}
	slices.Sort(silver)
	slices.Sort(bronze)
	if !slices.Equal(silver, bronze) {
		t.Fatalf("silver has %d rows, bronze %d (or they differ)", len(silver), len(bronze))
	}
	// Gold: the recount of bronze, windows the final watermark closed.
	type key struct {
		ws       time.Time
		customer string
	}
	count, sum := map[key]int64{}, map[key]float64{}
	var maxEvent time.Time
	for _, o := range rows {
		k := key{o.EventTime.Truncate(30 * time.Minute), o.Customer}
		count[k]++
		sum[k] += o.Amount
		if o.EventTime.After(maxEvent) {
			maxEvent = o.EventTime
		}
	}
	wm := maxEvent.Add(-20 * time.Minute)
	var want []string
	for k, n := range count {
		if !k.ws.Add(30 * time.Minute).After(wm) {
			want = append(want, fmt.Sprintf("%s %s %d %.2f", k.ws.Format("02T15:04"), k.customer, n, sum[k]))
		}
	}
	slices.Sort(want)
	if got := tableLines(t, filepath.Join(root, "gold")); !slices.Equal(got, want) {
		t.Fatalf("gold\n%v\nrecount\n%v", got, want)
	}
}
