package ethrpc

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// TestSilentEndpointFailsWithinBatchTimeout: an endpoint that accepts
// connections and never answers ends the batch with RPC_UNAVAILABLE and a
// remedy once batchTimeout has passed, not after every retry's timeout.
func TestSilentEndpointFailsWithinBatchTimeout(t *testing.T) {
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
			go func() { <-stop; c.Close() }() // read nothing, answer nothing
		}
	}()
	o, err := ParseURI("http://" + ln.Addr().String() + "?timeout=300ms&batchTimeout=1s&maxRetries=50")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	env := stream.SourceEnv{Name: "eth_live", Columns: ethblock.Columns, Clock: stream.SystemClock{}, Logger: slog.New(slog.DiscardHandler)}
	if err := s.Open(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = s.LatestOffset(context.Background(), nil)
	took := time.Since(start)
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Code != CodeRPCUnavailable || !strings.Contains(ce.Remedy, "batchTimeout") {
		t.Fatalf("want RPC_UNAVAILABLE naming batchTimeout, got %v", err)
	}
	if took > 5*time.Second {
		t.Fatalf("took %s with batchTimeout=1s", took)
	}
	// A query stopped by the engine is still just cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	if _, err := s.LatestOffset(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
