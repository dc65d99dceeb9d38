package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// limitedOp is countOp with a partition limit (stream.PartitionLimiter).
type limitedOp struct {
	countOp
	max int
}

func (o *limitedOp) CheckPartitions(from, to int) error {
	if from+to > o.max {
		return errcode.New("TEST_PARTITION_LIMIT", "", "use fewer", "%d+%d partitions", from, to)
	}
	return nil
}

// checkedSource and checkedSink fail their probe (stream.Checker) with err.
type checkedSource struct {
	memSource
	err error
}

func (s *checkedSource) Check(context.Context) error { return s.err }

type checkedSink struct {
	stream.Sink
	err error
}

func (s *checkedSink) Check(context.Context) error { return s.err }

// TestStartValidationRunAndPlan: every refusal of checkStart comes out of Run
// and Plan with the same code; a refused first start creates nothing (not
// even the checkpoint directory or .lock); a refused restart leaves the
// checkpoint byte-identical and the query runs afterwards.
func TestStartValidationRunAndPlan(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	w := &srcWorld{start: 100, available: 130, max: 10}
	table := newTable()
	probe := func(code string) error {
		if code == "" {
			return nil
		}
		return errcode.New(code, "", "fix it", "probe failed")
	}
	query := func(conf map[string]string, srcErr, sinkErr string, max int) Query {
		c := map[string]string{checkpoint.ConfSourceEvolution: "true"}
		for k, v := range conf {
			c[k] = v
		}
		return Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource},
			Sources:  []NamedSource{{Name: "eth_live", Source: &checkedSource{memSource: memSource{w: w, name: "eth_live"}, err: probe(srcErr)}}},
			Operator: &limitedOp{max: max}, Sink: &checkedSink{Sink: streamtest.Plain(table), err: probe(sinkErr)},
			Trigger: Trigger{Kind: AvailableNow}, Conf: c}
	}
	rows := []struct {
		name            string
		conf            map[string]string
		srcErr, sinkErr string
		max             int
		code            string
	}{
		{name: "conf value", conf: map[string]string{checkpoint.ConfShufflePartitions: "x"}, code: errcode.InvalidArgument},
		{name: "partitions above the maximum", conf: map[string]string{checkpoint.ConfShufflePartitions: "10001"}, code: errcode.InvalidArgument},
		{name: "partitions beyond the operator's limit", conf: map[string]string{checkpoint.ConfShufflePartitions: "300"}, max: 250, code: "TEST_PARTITION_LIMIT"},
		{name: "repartition beyond the operator's limit", conf: map[string]string{checkpoint.ConfStatePartitions: "100"}, max: 150, code: "TEST_PARTITION_LIMIT"},
		{name: "source probe", srcErr: "TEST_SOURCE_DOWN", code: "TEST_SOURCE_DOWN"},
		{name: "sink probe", sinkErr: "TEST_SINK_UNUSABLE", code: "TEST_SINK_UNUSABLE"},
	}
	for _, existing := range []bool{false, true} {
		dir := "new"
		if existing {
			dir = "ck"
		}
		before := treeHash(fs, dir)
		for _, r := range rows {
			if r.name == "repartition beyond the operator's limit" && !existing {
				continue // a new checkpoint has nothing to repartition
			}
			if r.name == "partitions beyond the operator's limit" && existing {
				continue // the checkpoint's count is pinned: the conf is a warning
			}
			max := r.max
			if max == 0 {
				max = 1000
			}
			_, runErr := Run(ctx, query(r.conf, r.srcErr, r.sinkErr, max), Options{FS: fs, CheckpointDir: dir, LocalDir: "cache"})
			_, planErr := Plan(ctx, query(r.conf, r.srcErr, r.sinkErr, max), fs, dir)
			if errcode.Code(runErr) != r.code || errcode.Code(planErr) != r.code {
				t.Errorf("%s (existing %v): run %v, plan %v; want %s", r.name, existing, runErr, planErr, r.code)
			}
			if _, err := fs.Stat(dir); !existing && err == nil {
				t.Errorf("%s: refused first start created %s", r.name, dir)
			}
			if _, err := fs.Stat("cache"); err == nil {
				t.Errorf("%s: refused start created the cache directory", r.name)
			}
			if got := treeHash(fs, dir); got != before {
				t.Errorf("%s (existing %v): checkpoint changed", r.name, existing)
			}
		}
		if !existing {
			// Create the query for the restart rows.
			if _, err := Run(ctx, query(nil, "", "", 1000), Options{FS: fs, CheckpointDir: "ck", LocalDir: "ck-cache"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Still usable: a repartition within the limit runs.
	sum, err := Run(ctx, query(map[string]string{checkpoint.ConfStatePartitions: "100"}, "", "", 1000), Options{FS: fs, CheckpointDir: "ck", LocalDir: "ck-cache"})
	if err != nil || sum.ControlBatches != 1 {
		t.Fatalf("restart after the refusals: %+v, %v", sum, err)
	}
}

func TestValidateConf(t *testing.T) {
	cases := []struct {
		conf     map[string]string
		code     string
		msg      string // in the error
		warnings []string
	}{
		{conf: map[string]string{checkpoint.ConfShufflePartitions: "8", checkpoint.ConfSourceEvolution: "true"}},
		// A typo of a known key is refused naming it (it once only warned).
		{conf: map[string]string{"spark.sql.shufle.partitions": "8"}, code: errcode.InvalidArgument, msg: "did you mean spark.sql.shuffle.partitions?"},
		{conf: map[string]string{"spark.sql.streaming.stateStore.partition": "8"}, code: errcode.InvalidArgument, msg: "did you mean spark.sql.streaming.stateStore.partitions?"},
		{conf: map[string]string{"Spark.SQL.Shuffle.Partitions": "8"}, code: errcode.InvalidArgument, msg: "did you mean spark.sql.shuffle.partitions?"},
		// A Spark key ethstream does not read passes, with a warning.
		{conf: map[string]string{"spark.sql.streaming.stateStore.compression.codec": "zstd"}, warnings: []string{"unknown conf spark.sql.streaming.stateStore.compression.codec is ignored"}},
		{conf: map[string]string{"my.own.key": "1"}},
		{conf: map[string]string{checkpoint.ConfShufflePartitions: "0"}, code: errcode.InvalidArgument},
		{conf: map[string]string{checkpoint.ConfShufflePartitions: "10001"}, code: errcode.InvalidArgument},
		{conf: map[string]string{checkpoint.ConfStatePartitions: "20000"}, code: errcode.InvalidArgument},
		{conf: map[string]string{checkpoint.ConfNoDataBatches: "yes"}, code: errcode.InvalidArgument},
		{conf: map[string]string{checkpoint.ConfOffsetLogVersion: "3"}, code: errcode.InvalidArgument},
		{conf: map[string]string{checkpoint.ConfMinBatchesToRetain: "-1"}, code: errcode.InvalidArgument},
		{conf: map[string]string{checkpoint.ConfProviderClass: "rocksdb"}, code: errcode.InvalidArgument},
		// The SQL front end's confs: the real keys pass, a typo is refused
		// naming the key, a value that is not a boolean is refused.
		{conf: map[string]string{ConfANSI: "false", ConfGroupByAliases: "true", ConfGroupByOrdinal: "false"}},
		{conf: map[string]string{"spark.sql.ansi.enable": "false"}, code: errcode.InvalidArgument, msg: "did you mean spark.sql.ansi.enabled?"},
		{conf: map[string]string{"spark.sql.groupByAlias": "false"}, code: errcode.InvalidArgument, msg: "did you mean spark.sql.groupByAliases?"},
		{conf: map[string]string{"spark.sql.groupByOrdinals": "false"}, code: errcode.InvalidArgument, msg: "did you mean spark.sql.groupByOrdinal?"},
		{conf: map[string]string{ConfANSI: "maybe"}, code: errcode.InvalidArgument},
		// The plugins' keys: typed, and never warned about as unknown.
		{conf: map[string]string{ConfSchemaInference: "true", ConfFileSinkCompactInterval: "5"}},
		{conf: map[string]string{ConfFileSinkCompactInterval: "0"}, code: errcode.InvalidArgument},
		{conf: map[string]string{ConfSchemaInference: "yes please"}, code: errcode.InvalidArgument},
	}
	for _, c := range cases {
		warnings, err := ValidateConf(c.conf)
		if errcode.Code(err) != c.code {
			t.Errorf("%v: err %v, want %q", c.conf, err, c.code)
		}
		if err != nil && !strings.Contains(err.Error(), ". To fix: ") {
			t.Errorf("%v: no remedy in %v", c.conf, err)
		}
		if err != nil && !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: error %v, want %q", c.conf, err, c.msg)
		}
		if len(warnings) != len(c.warnings) {
			t.Errorf("%v: warnings %q, want %q", c.conf, warnings, c.warnings)
			continue
		}
		for i := range warnings {
			if !strings.Contains(warnings[i], c.warnings[i]) {
				t.Errorf("%v: warning %q, want %q", c.conf, warnings[i], c.warnings[i])
			}
		}
	}
}

// TestKnownConfsFarApart: no key is within typo distance of two known keys,
// so a refused typo names the one key it is a typo of.
func TestKnownConfsFarApart(t *testing.T) {
	for i, a := range KnownConfs {
		for _, b := range KnownConfs[i+1:] {
			if d := editDistance(strings.ToLower(a), strings.ToLower(b)); d <= 2*typoDistance {
				t.Errorf("%s and %s are %d edits apart", a, b, d)
			}
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"shufle", "shuffle", 1}, {"abc", "abc", 0}, {"ab", "ba", 2}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
		if got := editDistance(c.b, c.a); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.b, c.a, got, c.d)
		}
	}
}
