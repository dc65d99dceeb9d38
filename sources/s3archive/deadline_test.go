package s3archive

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// TestS3SilentEndpoint: a store that accepts connections and never answers
// fails within its request timeout (and at the latest its batch timeout) with
// ARCHIVE_FILE_UNREADABLE and a remedy naming the options, instead of
// waiting forever.
func TestS3SilentEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { <-stop; c.Close() }()
		}
	}()
	o, err := ParseURI("s3://archive/v1.0/eth/blocks?endpoint=http://" + ln.Addr().String() + "&anonymous=true&region=us-east-1&timeout=300ms&batchTimeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	s := openSource(t, o, testEnv(t, vfs.NewMem()))
	start := time.Now()
	_, err = s.LatestOffset(t.Context(), nil)
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Code != ArchiveFileUnreadable || !strings.Contains(err.Error(), "batchTimeout=") {
		t.Fatalf("want %s naming batchTimeout, got %v", ArchiveFileUnreadable, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s with batchTimeout=1s", d)
	}
}
