package ethrpc

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/errcode"
)

// TestCheck probes a real node over loopback and a port nothing listens on:
// the refusal names the endpoint and the transport's reason, its code once.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	n := startChainNode(t, 3, ethnode.Faults{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		uri, code string
	}{
		{uri: n.URL()},
		{uri: down, code: CodeRPCUnavailable},
		// Failover: the probe succeeds if any endpoint answers.
		{uri: down + "?endpoints=" + n.URL()},
	} {
		o, err := ParseURI(c.uri)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Check(ctx)
		if errcode.Code(err) != c.code {
			t.Errorf("%s: Check = %v, want code %q", c.uri, err, c.code)
		}
		if err != nil && (strings.Count(err.Error(), c.code) != 1 || !strings.Contains(err.Error(), "connection refused") ||
			!strings.Contains(err.Error(), ". To fix: ")) {
			t.Errorf("%s: message %q", c.uri, err)
		}
	}
}
