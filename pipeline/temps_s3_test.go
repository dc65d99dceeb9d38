package pipeline

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/storage/s3test"
)

// TestDeadWriterTempsRemovedOnS3 is TestDeadWriterTempsRemovedAtStart on
// each S3 server (the embedded endpoint and Versity): temp keys of a dead
// writer (what a local table copied to S3, or a foreign tool, leaves; a
// publish on S3 is one conditional PUT and makes none) planted in the
// checkpoint and the table while a query holds the lease stay there: a
// second start is refused CHECKPOINT_LOCKED and removes nothing. Once the
// lease is released, the next start (the lease's holder, the table's only
// writer) removes them all, not after vacuum's retention, and finishes
// with the table of the recount.
func TestDeadWriterTempsRemovedOnS3(t *testing.T) {
	want := recount(t, mustArchive(t))
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		ckpt, table := s.Location("tmp/checkpoint"), s.Location("tmp/table")
		cancel, done := runCommitted(t, s, "tmp")
		const hex = ".0123456789abcdef.tmp"
		temps := []string{
			"tmp/checkpoint/.metadata" + hex,
			"tmp/checkpoint/offsets/.9" + hex,
			"tmp/checkpoint/commits/.9" + hex,
			"tmp/checkpoint/sources/" + flSource + "/.9" + hex,
			"tmp/checkpoint/shape/.9" + hex,
			"tmp/table/_delta_log/.00000000000000000009.json" + hex,
			"tmp/table/_delta_log/.00000000000000000009.checkpoint.parquet" + hex,
			"tmp/table/.part-00000-6f1c1f3e-8a4b-4c3e-9b8e-3f0e2b7d9a10-c000.snappy.parquet" + hex,
		}
		for _, k := range temps {
			if _, err := s.Client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(s.Bucket),
				Key: aws.String(k), Body: bytes.NewReader([]byte("partial"))}); err != nil {
				t.Fatal(err)
			}
		}
		left := func() []string {
			keys := s.Keys(t, "tmp/")
			var out []string
			for _, k := range temps {
				if slices.Contains(keys, k) {
					out = append(out, k)
				}
			}
			return out
		}

		second := s3Config(ckpt, table, t.TempDir(), archiveURI(t))
		if _, err := Run(context.Background(), second); !errcode.Is(err, errcode.CheckpointLocked) {
			t.Fatalf("start while the lease is held: %v, want %s", err, errcode.CheckpointLocked)
		}
		if got := left(); len(got) != len(temps) {
			t.Fatalf("a start without the lease removed temp keys: %d of %d left", len(got), len(temps))
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("first query: %v", err)
		}
		if got := left(); len(got) != len(temps) {
			t.Fatalf("the running query removed temp keys planted after its start: %d of %d left", len(got), len(temps))
		}

		if _, err := Run(context.Background(), second); err != nil {
			t.Fatalf("start once the lease is released: %v", err)
		}
		if got := left(); len(got) > 0 {
			t.Fatalf("temp keys of a dead writer left after a start holding the lease: %s", strings.Join(got, ", "))
		}
		if d := diffCounts(want, locTableCounts(t, table)); d != "" {
			t.Fatalf("table: %s", d)
		}
	})
}
