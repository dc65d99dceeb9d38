package ethnode

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"github.com/ethereum/go-ethereum/rpc"
)

// blockReadBodyLimit is go-ethereum's default HTTP body limit: a request
// larger than it goes to the rpc.Server, which refuses it in its own words.
const blockReadBodyLimit = 5 << 20

// blockReadCall is one call of a block-read request.
type blockReadCall struct {
	Version string            `json:"jsonrpc"`
	ID      json.RawMessage   `json:"id"`
	Method  string            `json:"method"`
	Params  []json.RawMessage `json:"params"`
}

// blockReadArgs are the decoded params of one eth_getBlockByNumber call.
type blockReadArgs struct {
	number rpc.BlockNumber
	full   bool
}

// serveBlockReads answers an HTTP JSON-RPC request, single or batch, made
// only of eth_getBlockByNumber calls (what a head-following client sends),
// and reports whether it did; anything else is left to the rpc.Server,
// with the body restored. It writes the cached block answers as they are:
// the rpc.Server re-validates and copies each json.RawMessage result twice
// (into the call's response, then into the batch) and dispatches each call
// by reflection, which was 3-6 ms of a 20-block batch's answer. The calls
// run in order through GetBlockByNumber, so tags, the head hook and the
// answers are the rpc.Server's.
func (n *Node) serveBlockReads(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || r.ContentLength > blockReadBodyLimit || !jsonContentType(r.Header.Get("Content-Type")) {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, blockReadBodyLimit+1))
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || len(body) > blockReadBodyLimit {
		return false
	}
	calls, batch, ok := parseBlockReads(body)
	if !ok {
		return false
	}
	api := &ethAPI{n}
	results := make([]json.RawMessage, len(calls))
	size := 2
	for i, a := range calls {
		res, err := api.GetBlockByNumber(r.Context(), a.args.number, a.args.full)
		if err != nil {
			return false // an unsupported tag: the rpc.Server words the error
		}
		results[i] = res
		size += len(res) + len(a.call.ID) + 40
	}
	out := make([]byte, 0, size)
	if batch {
		out = append(out, '[')
	}
	for i, a := range calls {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"jsonrpc":"2.0","id":`...)
		out = append(out, a.call.ID...)
		out = append(out, `,"result":`...)
		out = append(out, results[i]...)
		out = append(out, '}')
	}
	if batch {
		out = append(out, ']')
	}
	out = append(out, '\n')
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
	return true
}

// parsedBlockRead is a call with its decoded arguments.
type parsedBlockRead struct {
	call blockReadCall
	args blockReadArgs
}

// parseBlockReads decodes body as one call or a non-empty batch of calls,
// each eth_getBlockByNumber(number or tag, bool) with a JSON-RPC 2.0
// version and an id; ok is false for anything else.
func parseBlockReads(body []byte) (calls []parsedBlockRead, batch, ok bool) {
	body = bytes.TrimSpace(body)
	var raw []blockReadCall
	switch {
	case len(body) > 0 && body[0] == '[':
		if json.Unmarshal(body, &raw) != nil || len(raw) == 0 {
			return nil, false, false
		}
		batch = true
	case len(body) > 0 && body[0] == '{':
		var c blockReadCall
		if json.Unmarshal(body, &c) != nil {
			return nil, false, false
		}
		raw = []blockReadCall{c}
	default:
		return nil, false, false
	}
	calls = make([]parsedBlockRead, len(raw))
	for i, c := range raw {
		if c.Version != "2.0" || c.Method != "eth_getBlockByNumber" || len(c.Params) != 2 ||
			len(c.ID) == 0 || string(c.ID) == "null" {
			return nil, false, false
		}
		a := &calls[i].args
		if a.number.UnmarshalJSON(c.Params[0]) != nil || json.Unmarshal(c.Params[1], &a.full) != nil ||
			string(bytes.TrimSpace(c.Params[1])) == "null" {
			return nil, false, false
		}
		calls[i].call = c
	}
	return calls, batch, true
}

// jsonContentType reports whether v is a media type the rpc.Server accepts.
func jsonContentType(v string) bool {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return false
	}
	switch mt {
	case "application/json", "application/json-rpc", "application/jsonrequest":
		return true
	}
	return false
}
