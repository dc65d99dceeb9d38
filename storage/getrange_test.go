package storage

import (
	"bytes"
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ethstream/ethstream/internal/s3client"
	"github.com/ethstream/ethstream/storage/s3test"
)

// TestGetRangeInto: a range read fills exactly the caller's slice (bytes
// past it in the same backing array are untouched, so a reader may hand a
// larger reused buffer), and a range the object does not hold in full is
// an error, never a silently short buffer.
func TestGetRangeInto(t *testing.T) {
	s := s3test.Embedded(t)
	ctx := context.Background()
	obj := make([]byte, 100_000)
	for i := range obj {
		obj[i] = byte(i*7 + i>>8)
	}
	if _, err := s.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("k"), Body: bytes.NewReader(obj)}); err != nil {
		t.Fatal(err)
	}
	o, err := NewObjects(ctx, ObjectsOptions{Conn: s3client.Conn{Endpoint: s.Endpoint, Anonymous: true, PathStyle: true},
		Bucket: s.Bucket, Retry: Retry{Attempts: 2}, Clock: func() Clock { return &manualClock{} }})
	if err != nil {
		t.Fatal(err)
	}
	backing := bytes.Repeat([]byte{0xEE}, 70_000)
	for _, r := range []struct{ off, n int64 }{{0, 1}, {12_345, 54_321}, {100_000 - 70_000, 70_000}} {
		p := backing[:r.n]
		if err := o.GetRangeInto(ctx, "k", r.off, p); err != nil {
			t.Fatalf("GetRangeInto(%d, %d): %v", r.off, r.n, err)
		}
		if !bytes.Equal(p, obj[r.off:r.off+r.n]) {
			t.Fatalf("GetRangeInto(%d, %d): wrong bytes", r.off, r.n)
		}
		if r.n < int64(len(backing)) && backing[r.n] == obj[r.off+r.n] {
			t.Fatalf("GetRangeInto(%d, %d) wrote past its slice", r.off, r.n)
		}
	}
	for _, off := range []int64{99_990, 100_000} {
		if err := o.GetRangeInto(ctx, "k", off, make([]byte, 20)); err == nil {
			t.Fatalf("GetRangeInto(%d, 20) of a 100,000-byte object succeeded", off)
		}
	}
}
