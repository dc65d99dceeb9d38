package files

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

const ordersDDL = "order_id STRING, amount DOUBLE, event_time TIMESTAMP, qty INT"

func ordersURI(dir, extra string) string {
	u := fileLoc(dir) + "?schema=" + url.QueryEscape(ordersDDL)
	if extra != "" {
		u += "&" + extra
	}
	return u
}

func someOrders(prefix string, n int, at time.Time) []order {
	out := make([]order, n)
	for i := range out {
		out[i] = order{OrderID: strp(fmt.Sprintf("%s-%d", prefix, i)), Amount: float64(i) + 0.25, EventTime: at.Add(time.Duration(i) * time.Minute)}
		if i%3 != 1 {
			out[i].Qty = i32p(int32(i * 7))
		}
		if i == 4 {
			out[i].OrderID = nil
		}
	}
	return out
}

// TestParquetPartitionedDirectory streams a directory of Parquet files
// under region=us / region=eu (with Spark's _SUCCESS and .crc files beside
// them) one file per trigger, then a restart that admits only a new file;
// every row read is a row written, with its partition value, and the
// source log is Spark's format.
func TestParquetPartitionedDirectory(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	us, eu := someOrders("us", 7, t0), someOrders("eu", 5, t0.Add(time.Hour))
	writeParquetFile(t, dir, "region=us/part-00000.parquet", us)
	writeParquetFile(t, dir, "region=eu/part-00000.parquet", eu)
	writeFile(t, dir, "_SUCCESS", "")
	writeFile(t, dir, "region=us/.part-00000.parquet.crc", "x")
	touch(t, dir, "region=us/part-00000.parquet", t0)
	touch(t, dir, "region=eu/part-00000.parquet", t0.Add(time.Minute))

	s := mustSource(t, Parquet, ordersURI(dir, "maxFilesPerTrigger=1"))
	want := stream.Schema{Fields: []stream.Field{{Name: "order_id", Type: stream.String, Nullable: true}, {Name: "amount", Type: stream.Float64, Nullable: true},
		{Name: "event_time", Type: stream.Timestamp, Nullable: true}, {Name: "qty", Type: stream.Int32, Nullable: true}, {Name: "region", Type: stream.String, Nullable: true}}}
	if got := s.Schema(); !got.Equal(want) {
		t.Fatalf("schema %v, want %v", got, want)
	}
	env := testEnv(t)
	if err := s.Open(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	batches, end := drain(t, s, nil)
	if len(batches) != 2 || string(end) != `{"logOffset":1}` {
		t.Fatalf("%d batches, end %s", len(batches), end)
	}
	var wantRows []string
	for _, o := range us {
		wantRows = append(wantRows, orderRow(o, "us"))
	}
	if got := batches[0]; !slices.Equal(got, wantRows) {
		t.Fatalf("first batch (the older file, in row order):\n%v\nwant\n%v", got, wantRows)
	}
	for _, o := range eu {
		wantRows = append(wantRows, orderRow(o, "eu"))
	}
	slices.Sort(wantRows)
	if got := flat(batches); !slices.Equal(got, wantRows) {
		t.Fatalf("rows:\n%v\nwant\n%v", got, wantRows)
	}
	log0 := readAll(t, env, "0")
	if !strings.HasPrefix(log0, "v1\n{\"path\":\"file://"+dir+"/region=us/part-00000.parquet\",\"timestamp\":"+fmt.Sprint(t0.UnixMilli())+",\"batchId\":0,\"size\":") {
		t.Fatalf("log 0:\n%s", log0)
	}

	// A restart from the committed offset: a new file is admitted, the old
	// ones never again.
	more := someOrders("us2", 3, t0.Add(2*time.Hour))
	writeParquetFile(t, dir, "region=us/part-00001.parquet", more)
	touch(t, dir, "region=us/part-00001.parquet", t0.Add(2*time.Minute))
	s2 := mustSource(t, Parquet, ordersURI(dir, ""))
	env.Committed = end
	if err := s2.Open(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	batches, end = drain(t, s2, end)
	var wantMore []string
	for _, o := range more {
		wantMore = append(wantMore, orderRow(o, "us"))
	}
	if len(batches) != 1 || !slices.Equal(batches[0], wantMore) || string(end) != `{"logOffset":2}` {
		t.Fatalf("after restart: %v (end %s), want %v", batches, end, wantMore)
	}
}

func readAll(t *testing.T, env stream.SourceEnv, name string) string {
	t.Helper()
	f, err := env.FS.Open(env.FS.PathJoin(env.MetadataDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProjection reads two columns, one a partition column, in the
// projection's order.
func TestProjection(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	rows := someOrders("x", 4, t0)
	writeParquetFile(t, dir, "day=7/f.parquet", rows)
	s := mustSource(t, Parquet, ordersURI(dir, ""))
	env := testEnv(t)
	env.Columns = []string{"day", "ORDER_ID"}
	if err := s.Open(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	got, _ := drain(t, s, nil)
	want := []string{"7|x-0", "7|x-1", "7|x-2", "7|x-3"}
	if !slices.Equal(flat(got), want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	env.Columns = []string{"nope"}
	if err := mustSource(t, Parquet, ordersURI(dir, "")).Open(t.Context(), env); errcode.Code(err) != errcode.InvalidArgument {
		t.Fatalf("unknown column: %v", err)
	}
}

// TestSchemaRequired: without schema= and with schemaInference off the
// source is refused at construction (before any write), with Spark's
// message; with inference it reads the schema from the files.
func TestSchemaRequired(t *testing.T) {
	dir := t.TempDir()
	_, err := NewFromURI(CSV, fileLoc(dir), false)
	if errcode.Code(err) != CodeSchemaRequired || !strings.Contains(err.Error(), "schema must be specified when creating a streaming source DataFrame") ||
		!strings.Contains(err.Error(), "spark.sql.streaming.schemaInference") {
		t.Fatalf("%v", err)
	}
	s, err := NewFromURI(CSV, fileLoc(dir)+"?header=true", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(t.Context(), testEnv(t)); errcode.Code(err) != CodeSchemaRequired || !strings.Contains(err.Error(), "has no files") {
		t.Fatalf("empty directory: %v", err)
	}
}

func TestInference(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.csv", "id,name,score,at\n1,ann,2.5,2026-01-02 03:04:05\n9999999999,bob,3,2026-01-02T00:00:00Z\n")
	writeFile(t, dir, "b.jsonl", "")
	for _, c := range []struct {
		uri  string
		want string
	}{
		{fileLoc(dir) + "?header=true&pathGlobFilter=*.csv", "id string null, name string null, score string null, at string null"},
		{fileLoc(dir) + "?header=true&inferSchema=true&pathGlobFilter=*.csv", "id int64 null, name string null, score float64 null, at timestamp null"},
		{fileLoc(dir) + "?pathGlobFilter=*.csv", "_c0 string null, _c1 string null, _c2 string null, _c3 string null"},
	} {
		s, err := NewFromURI(CSV, c.uri, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Schema().String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.uri, got, c.want)
		}
	}
	jdir := t.TempDir()
	writeFile(t, jdir, "k=1/a.json", `{"z":1,"a":"x","m":null}`+"\n"+`{"z":2.5,"b":"2026-01-01"}`+"\n\n")
	s, err := NewFromURI(JSON, fileLoc(jdir), true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Schema().String(), "a string null, b string null, m string null, z float64 null, k int null"; got != want {
		t.Fatalf("json: %s, want %s", got, want)
	}
	writeFile(t, jdir, "k=1/b.json", `{"flag":true}`)
	s, _ = NewFromURI(JSON, fileLoc(jdir), true)
	if err := s.Open(t.Context(), testEnv(t)); err != nil || !strings.Contains(s.Schema().String(), "flag boolean null") {
		t.Fatalf("boolean: %v, schema %s", err, s.Schema())
	}
	writeFile(t, jdir, "k=1/c.json", `{"arr":[1]}`)
	s, _ = NewFromURI(JSON, fileLoc(jdir), true)
	if err := s.Open(t.Context(), testEnv(t)); errcode.Code(err) != "UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE" || !strings.Contains(err.Error(), "`arr` is inferred as ARRAY") {
		t.Fatalf("array: %v", err)
	}
	pdir := t.TempDir()
	writeParquetFile(t, pdir, "f.parquet", someOrders("p", 2, time.Unix(0, 0)))
	s, _ = NewFromURI(Parquet, fileLoc(pdir), true)
	if got, want := s.Schema().String(), "order_id string null, amount float64 null, event_time timestamp null, qty int null"; got != want {
		t.Fatalf("parquet: %s, want %s", got, want)
	}
}

// TestConflictingPartitions: files at the root beside key=value
// directories are refused with Spark's error class, unless
// recursiveFileLookup=true, which reads every file without partition
// columns.
func TestConflictingPartitions(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.json", `{"x":1}`)
	writeFile(t, dir, "k=1/b.json", `{"x":2}`)
	s := mustSource(t, JSON, fileLoc(dir)+"?schema=x+BIGINT")
	if err := s.Open(t.Context(), testEnv(t)); errcode.Code(err) != CodeConflictingPartitions {
		t.Fatalf("%v", err)
	}
	s = mustSource(t, JSON, fileLoc(dir)+"?schema=x+BIGINT&recursiveFileLookup=true")
	if err := s.Open(t.Context(), testEnv(t)); err != nil {
		t.Fatal(err)
	}
	got, _ := drain(t, s, nil)
	if !slices.Equal(flat(got), []string{"1", "2"}) {
		t.Fatalf("%v", got)
	}
}

// TestLimitsAndOrder: files are admitted oldest first (modification time),
// maxBytesPerTrigger is a soft cap, latestFirst reverses the order, and
// availableNow admits only files present when it was prepared.
func TestLimitsAndOrder(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, name := range []string{"c.json", "a.json", "b.json"} {
		writeFile(t, dir, name, fmt.Sprintf(`{"x":%d}`+"\n", i))
		touch(t, dir, name, t0.Add(time.Duration(i)*time.Hour))
	}
	run := func(opts string) [][]string {
		s := mustSource(t, JSON, fileLoc(dir)+"?schema=x+BIGINT&"+opts)
		if err := s.Open(t.Context(), testEnv(t)); err != nil {
			t.Fatal(err)
		}
		got, _ := drain(t, s, nil)
		return got
	}
	if got := fmt.Sprint(run("maxFilesPerTrigger=2")); got != "[[0 1] [2]]" {
		t.Errorf("oldest first: %s", got)
	}
	if got := fmt.Sprint(run("maxBytesPerTrigger=1")); got != "[[0] [1] [2]]" {
		t.Errorf("soft byte cap: %s", got)
	}
	if got := fmt.Sprint(run("latestFirst=true&maxFilesPerTrigger=2")); got != "[[2 1] [0]]" {
		t.Errorf("latest first: %s", got)
	}
	s := mustSource(t, JSON, fileLoc(dir)+"?schema=x+BIGINT&maxFilesPerTrigger=1")
	if err := s.Open(t.Context(), testEnv(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.PrepareAvailableNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "d.json", `{"x":3}`)
	if got, _ := drain(t, s, nil); fmt.Sprint(got) != "[[0] [1] [2]]" {
		t.Errorf("availableNow: %v", got)
	}
}

// TestMaxFileAge: once files were admitted, a new file older than the
// newest admitted one by more than maxFileAge is never admitted (Spark's
// SeenFilesMap); the first admission takes every file.
func TestMaxFileAge(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	writeFile(t, dir, "old.json", `{"x":1}`)
	touch(t, dir, "old.json", t0.Add(-30*24*time.Hour))
	writeFile(t, dir, "new.json", `{"x":2}`)
	touch(t, dir, "new.json", t0)
	s := mustSource(t, JSON, fileLoc(dir)+"?schema=x+BIGINT&maxFileAge=7d")
	if err := s.Open(t.Context(), testEnv(t)); err != nil {
		t.Fatal(err)
	}
	got, end := drain(t, s, nil)
	if fmt.Sprint(got) != "[[1 2]]" {
		t.Fatalf("first: %v", got)
	}
	writeFile(t, dir, "late.json", `{"x":3}`)
	touch(t, dir, "late.json", t0.Add(-8*24*time.Hour))
	writeFile(t, dir, "recent.json", `{"x":4}`)
	touch(t, dir, "recent.json", t0.Add(-6*24*time.Hour))
	if got, _ := drain(t, s, end); fmt.Sprint(got) != "[[4]]" {
		t.Fatalf("later: %v", got)
	}
}

// TestUnreadableFile: a file that is not Parquet fails the batch with
// FAILED_READ_FILE naming it; a column of another type likewise.
func TestUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "bad.parquet", "not parquet at all")
	s := mustSource(t, Parquet, ordersURI(dir, ""))
	if err := s.Open(t.Context(), testEnv(t)); err != nil {
		t.Fatal(err)
	}
	end, err := s.LatestOffset(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.ReadBatch(t.Context(), nil, end, func(*stream.Batch) error { return nil })
	if errcode.Code(err) != CodeFailedReadFile || !strings.Contains(err.Error(), "bad.parquet") {
		t.Fatalf("%v", err)
	}
	dir2 := t.TempDir()
	writeParquetFile(t, dir2, "f.parquet", someOrders("a", 1, time.Unix(0, 0)))
	s = mustSource(t, Parquet, fileLoc(dir2)+"?schema="+url.QueryEscape("order_id BIGINT"))
	if err := s.Open(t.Context(), testEnv(t)); err != nil {
		t.Fatal(err)
	}
	end, _ = s.LatestOffset(t.Context(), nil)
	err = s.ReadBatch(t.Context(), nil, end, func(*stream.Batch) error { return nil })
	if errcode.Code(err) != CodeFailedReadFile || !strings.Contains(err.Error(), "the schema says int64") {
		t.Fatalf("%v", err)
	}
}
