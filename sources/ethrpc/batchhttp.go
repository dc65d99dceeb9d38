package ethrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
)

// The block batch over HTTP (and websocket, batchws.go): fetchChunk posts
// its eth_getBlockByNumber batch itself and decodes the answer in one validation pass plus one scan,
// instead of go-ethereum's client, which decodes the batch into messages
// (one pass), then each result again (validation, a skip to find its end,
// and only then the block's own scan): those four passes over a 20-block
// answer (~320 KB) were most of the source's share of a live trigger. The
// errors are the ones go-ethereum's client returns, so the pool's retry
// rules (classify) read them unchanged: rpc.HTTPError for a non-2xx
// status, an rpc.Error for an error object, the transport's errors, and a
// *json.SyntaxError for an answer that is not JSON. Websocket endpoints
// keep go-ethereum's client.

// errMissingResponse: the answer had no message for a call (go-ethereum's
// client says the same with rpc.ErrMissingBatchResponse); retried.
var errMissingResponse = errors.New("response batch did not contain a response to this call")

// errNoResult: a message with neither result nor error; retried.
var errNoResult = errors.New("JSON-RPC response has no result")

// jsonError is a JSON-RPC error object; it implements rpc.Error.
type jsonError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *jsonError) Error() string {
	if e.Message == "" {
		return "json-rpc error " + strconv.Itoa(e.Code)
	}
	return e.Message
}

// ErrorCode implements rpc.Error.
func (e *jsonError) ErrorCode() int { return e.Code }

var _ rpc.Error = (*jsonError)(nil)

// blocksRequest is the batch eth_getBlockByNumber(n, false) for every n of
// nums, call i with id i+1.
func blocksRequest(nums []uint64) []byte {
	body := make([]byte, 0, 90*len(nums)+2)
	body = append(body, '[')
	for i, n := range nums {
		if i > 0 {
			body = append(body, ',')
		}
		body = fmt.Appendf(body, `{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["%s",false]}`,
			i+1, hexutil.EncodeUint64(n))
	}
	return append(body, ']')
}

// postBatch posts the batch request body to url through hc and returns the
// answer's bytes; err is the transport's or an rpc.HTTPError.
func postBatch(ctx context.Context, hc *http.Client, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, rerr := readBody(resp)
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return nil, rpc.HTTPError{Status: resp.Status, StatusCode: resp.StatusCode, Body: data}
	}
	if rerr != nil {
		return nil, rerr
	}
	return data, nil
}

// readBody reads an answer into one buffer of its announced length (a
// table batch is megabytes: io.ReadAll's doublings copied it ~20 times).
func readBody(resp *http.Response) ([]byte, error) {
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 && n <= 1<<30 {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom wants MinRead spare bytes
	}
	_, err := buf.ReadFrom(resp.Body)
	return buf.Bytes(), err
}

// decodeBatchAnswer decodes a batch answer whose calls have ids 1..len(res)
// (call i has id i+1). Messages with other ids are ignored, as go-ethereum's
// client ignores them.
func decodeBatchAnswer(data []byte, res []blockResult) ([]error, error) {
	return decodeBatch(data, len(res), func(k int, result []byte) error {
		_ = res[k].UnmarshalJSON(result) // never fails; keeps its error
		return nil
	})
}

// decodeBatch decodes a batch answer whose calls have ids 1..n (call k has
// id k+1), handing each call's result (valid JSON) to set, whose error is
// the call's own, as go-ethereum's client reports a result that does not
// decode. Messages with other ids are ignored, as go-ethereum's client
// ignores them.
func decodeBatch(data []byte, n int, set func(k int, result []byte) error) ([]error, error) {
	// One validation pass (validJSON, json.Valid's answer at a quarter of
	// its CPU); the decoders below read valid JSON only. A malformed answer
	// gets encoding/json's own error, as before.
	if !validJSON(data) {
		var v any
		err := json.Unmarshal(data, &v) // the decoder's own *json.SyntaxError
		if err == nil {
			err = &json.SyntaxError{}
		}
		return nil, err
	}
	i := skipWS(data, 0)
	if data[i] == '{' {
		// One message for the whole batch: an endpoint's refusal of it.
		_, _, _, jerr, _, err := batchMessage(data, i)
		if err == nil && jerr != nil {
			return nil, jerr
		}
		return nil, fmt.Errorf("batch answered with one message, not an array")
	}
	if data[i] != '[' {
		return nil, fmt.Errorf("batch answer is not an array")
	}
	errs := make([]error, n)
	seen := make([]bool, n)
	for i = skipWS(data, i+1); i < len(data) && data[i] != ']'; {
		id, result, hasResult, jerr, end, err := batchMessage(data, i)
		if err != nil {
			return nil, err
		}
		if k := id - 1; k >= 0 && k < n && !seen[k] {
			seen[k] = true
			switch {
			case jerr != nil:
				errs[k] = jerr
			case !hasResult:
				errs[k] = errNoResult
			default:
				errs[k] = set(k, result)
			}
		}
		i = skipWS(data, end)
		if i < len(data) && data[i] == ',' {
			i = skipWS(data, i+1)
		}
	}
	for k := range errs {
		if !seen[k] {
			errs[k] = errMissingResponse
		}
	}
	return errs, nil
}

// batchMessage reads the answer message at m[at:] of valid JSON: its id
// (0 unless a positive integer), its result, its error object, and the
// index after it. A message whose keys are not plain strings goes through
// encoding/json.
func batchMessage(m []byte, at int) (id int, result []byte, hasResult bool, jerr *jsonError, end int, err error) {
	i := skipWS(m, at)
	if i >= len(m) || m[i] != '{' {
		return 0, nil, false, nil, 0, fmt.Errorf("batch answer element is not an object")
	}
	var errRaw []byte
	for i = skipWS(m, i+1); i < len(m) && m[i] != '}'; {
		key, j, ok := plainString(m, i)
		if !ok {
			end := skipValue(m, at)
			id, result, hasResult, jerr, err := slowMessage(m[at:end])
			return id, result, hasResult, jerr, end, err
		}
		i = skipWS(m, j)
		i = skipWS(m, i+1) // past ':'
		vend := skipValue(m, i)
		switch key {
		case "id":
			id, _ = strconv.Atoi(string(m[i:vend]))
		case "result":
			result, hasResult = m[i:vend], true
		case "error":
			errRaw = m[i:vend]
		}
		i = skipWS(m, vend)
		if i < len(m) && m[i] == ',' {
			i = skipWS(m, i+1)
		}
	}
	if i < len(m) {
		i++ // past '}'
	}
	if len(errRaw) > 0 && string(errRaw) != "null" {
		jerr = &jsonError{}
		if err := json.Unmarshal(errRaw, jerr); err != nil {
			return 0, nil, false, nil, 0, fmt.Errorf("batch answer error object: %w", err)
		}
	}
	return id, result, hasResult, jerr, i, nil
}

// slowMessage is batchMessage through encoding/json (keys with escapes).
func slowMessage(m []byte) (int, []byte, bool, *jsonError, error) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *jsonError      `json:"error"`
	}
	if err := json.Unmarshal(m, &msg); err != nil {
		return 0, nil, false, nil, err
	}
	id, _ := strconv.Atoi(string(msg.ID))
	return id, msg.Result, msg.Result != nil, msg.Error, nil
}
