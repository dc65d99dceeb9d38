package ethrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
)

// refBatchAnswer is decodeBatchAnswer through encoding/json, the way
// go-ethereum's client decodes: the oracle of the one-pass decoder.
func refBatchAnswer(data []byte, n int) ([]string, error) {
	var msgs []struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *jsonError      `json:"error"`
	}
	if err := json.Unmarshal(data, &msgs); err != nil {
		var one struct {
			Error *jsonError `json:"error"`
		}
		if json.Unmarshal(data, &one) == nil && one.Error != nil {
			return nil, one.Error
		}
		return nil, err
	}
	out := make([]string, n)
	seen := make([]bool, n)
	for _, m := range msgs {
		id, err := strconv.Atoi(string(m.ID))
		if k := id - 1; err == nil && k >= 0 && k < n && !seen[k] {
			seen[k] = true
			switch {
			case m.Error != nil:
				out[k] = fmt.Sprintf("error %d %s", m.Error.Code, m.Error.Message)
			case m.Result == nil:
				out[k] = errNoResult.Error()
			default:
				out[k] = blockOutcome(parseBlock(m.Result))
			}
		}
	}
	for k := range out {
		if !seen[k] {
			out[k] = errMissingResponse.Error()
		}
	}
	return out, nil
}

// blockOutcome renders a decoded result: the row, or which failure (the
// two decoders word a malformed block differently, e.g. for invalid UTF-8).
func blockOutcome(r blockRow, err error) string {
	switch {
	case errors.Is(err, errBlockNotFound):
		return "not found"
	case err != nil:
		return "malformed block"
	}
	return fmt.Sprintf("%+v", r)
}

// fastBatchAnswer renders decodeBatchAnswer's outcome as refBatchAnswer does.
func fastBatchAnswer(data []byte, n int) ([]string, error) {
	res := make([]blockResult, n)
	errs, err := decodeBatchAnswer(data, res)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for k := range out {
		var je *jsonError
		switch {
		case errors.As(errs[k], &je):
			out[k] = fmt.Sprintf("error %d %s", je.Code, je.Message)
		case errs[k] != nil:
			out[k] = errs[k].Error()
		default:
			out[k] = blockOutcome(res[k].row, res[k].err)
		}
	}
	return out, nil
}

var batchAnswerCases = []string{ // not const: sampleBlock is a var
	`[{"jsonrpc":"2.0","id":1,"result":` + sampleBlock + `},{"jsonrpc":"2.0","id":2,"result":null}]`,
	`[{"id":2,"result":` + sampleBlock + `} , {"id":1,"error":{"code":-32005,"message":"rate limit"}}]`,
	`[{"id":1,"result":` + sampleBlock + `},{"id":1,"result":null},{"id":7,"result":1}]`,
	`[{"id":1}]`, `[]`, `[{"i\u0064":1,"result":` + sampleBlock + `}]`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"batch too large"}}`,
	`[{"id":1,"result":{"number":"0x1"}},{"id":2,"error":null,"result":"x"}]`,
}

func TestBatchAnswerAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range batchAnswerCases {
		want, werr := refBatchAnswer([]byte(c), 2)
		got, gerr := fastBatchAnswer([]byte(c), 2)
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("answer %.120s:\n got %q %v\nwant %q %v", c, got, gerr, want, werr)
		}
	}
	// Not JSON: the decoder's syntax error, which the pool retries.
	if _, err := fastBatchAnswer([]byte(`[{"id":1,"result":{`), 1); classify(err) != classRetry {
		t.Errorf("truncated answer: %v (class %d), want a retried error", err, classify(err))
	}
	var je *jsonError
	if _, err := fastBatchAnswer([]byte(batchAnswerCases[6]), 2); !errors.As(err, &je) || classify(err) != classTooLarge {
		t.Errorf("refused batch: %v, want an rpc.Error classified too large", err)
	}
}

// FuzzBatchAnswer: on any valid JSON answer the one-pass decoder agrees with
// encoding/json's; on anything else it fails.
func FuzzBatchAnswer(f *testing.F) {
	for _, c := range batchAnswerCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gerr := fastBatchAnswer(data, 3)
		if !json.Valid(data) {
			if gerr == nil {
				t.Fatalf("invalid JSON %q decoded", data)
			}
			return
		}
		want, werr := refBatchAnswer(data, 3)
		if werr == nil && (gerr != nil || !reflect.DeepEqual(got, want)) {
			t.Fatalf("answer %q:\n got %q %v\nwant %q", data, got, gerr, want)
		}
	})
}

// FuzzSkipValue: on valid JSON, skipValue ends each element of an array
// where encoding/json's decoder ends it (the string fast path included).
func FuzzSkipValue(f *testing.F) {
	for _, c := range []string{`"a\"b"`, `"\\"`, `{"k":"v\\","x":["\"",1]}`, `"0xabc"`, `[{"a":"b"}]`, `"\u0022"`, sampleBlock} {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if !json.Valid(v) {
			return
		}
		data := append(append([]byte(`[`), v...), []byte(` , "tail\\""]`)...)
		dec := json.NewDecoder(bytes.NewReader(data))
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		i := skipWS(data, 1)
		end := skipValue(data, i)
		if got := bytes.TrimSpace(data[i:end]); !bytes.Equal(got, raw) {
			t.Fatalf("skipValue(%q) = %q, want %q", data, got, raw)
		}
	})
}
