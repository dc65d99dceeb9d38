package ethrpc

import (
	"log/slog"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
)

// Defaults applied by New to zero-valued Options fields.
const (
	DefaultMaxBlocksPerTrigger = 20
	DefaultMaxBatchSize        = 100
	DefaultTimeout             = 10 * time.Second
	DefaultMaxRetries          = 8
	DefaultParallelism         = 4
)

// Options configures a Source. The zero value of each field selects its default.
type Options struct {
	// Endpoints are JSON-RPC URLs (http, https, ws, wss); with several, a
	// failing endpoint fails over to the next.
	Endpoints []string
	// MaxBlocksPerTrigger caps the blocks of one batch (default 20).
	MaxBlocksPerTrigger int
	// StartBlock is the first block read, honoured only when the engine has no
	// committed offset for the source's name. 0 starts at the readable head.
	StartBlock uint64
	// StartParentHash, if set, must equal the very first block's parentHash
	// (the archive's last hash), else SEAM_MISMATCH.
	StartParentHash string
	// Confirmations: only blocks <= head - Confirmations are read.
	Confirmations uint64
	// Finality is "", "safe" or "finalized": only blocks <= that tag's block
	// are read (combined with Confirmations, the lower bound wins).
	Finality string
	// MaxBatchSize is the most calls per JSON-RPC batch request (default 100);
	// the source halves it when the endpoint answers "batch too large".
	MaxBatchSize int
	// Timeout bounds each HTTP request / RPC call (default 10s).
	Timeout time.Duration
	// MaxRetries bounds the retries of one call across all endpoints (default 8).
	MaxRetries int
	// Parallelism bounds the batch requests in flight for one range (default
	// 4); a range is split so that each gets at least 25 blocks.
	Parallelism int
	// Logger receives retries and failovers; nil uses the engine's logger.
	Logger *slog.Logger
}

// uriKeys maps every accepted option spelling to its canonical name. Spark
// style camelCase and the snake_case of docs/contracts.md, Configuration are both accepted.
var uriKeys = map[string]string{
	"maxBlocksPerTrigger": "maxBlocksPerTrigger", "max_blocks_per_trigger": "maxBlocksPerTrigger",
	"start_block": "start_block", "startBlock": "start_block",
	"start_parent_hash": "start_parent_hash", "startParentHash": "start_parent_hash",
	"confirmations": "confirmations",
	"finality":      "finality",
	"endpoints":     "endpoints",
	"maxBatchSize":  "maxBatchSize", "max_batch_size": "maxBatchSize",
	"timeout":    "timeout",
	"maxRetries": "maxRetries", "max_retries": "maxRetries",
	"parallelism": "parallelism",
}

// ParseURI parses the source URI of `ethstream run --source NAME=ethrpc:URI`:
// an endpoint URL whose query string holds the source options, e.g.
// "http://127.0.0.1:8545?maxBlocksPerTrigger=20&start_block=26086570&confirmations=0".
// Options: maxBlocksPerTrigger, start_block, start_parent_hash, confirmations,
// finality (safe|finalized), endpoints (comma-separated further URLs, tried in
// order after the URI's own), maxBatchSize, parallelism, timeout (Go duration),
// maxRetries.
// An unknown option is an INVALID_ARGUMENT error: a typo must not silently
// read from the wrong block. An endpoint that needs its own query string
// (an API key) goes URL-encoded into endpoints=.
func ParseURI(uri string) (Options, error) {
	uri = strings.TrimPrefix(uri, "ethrpc:")
	base, query, _ := strings.Cut(uri, "?")
	var o Options
	if base != "" {
		if err := checkEndpoint(base); err != nil {
			return Options{}, err
		}
		o.Endpoints = append(o.Endpoints, base)
	}
	vals, err := url.ParseQuery(query)
	if err != nil {
		return Options{}, errcode.Wrap(err, CodeInvalidOption, "", "fix the query string of the ethrpc URI", "parse ethrpc URI %q", redact(uri))
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys) // report the first bad option deterministically
	seen := map[string]string{}
	for _, k := range keys {
		canon, ok := uriKeys[k]
		if !ok {
			return Options{}, errcode.New(CodeInvalidOption, "",
				"valid options: maxBlocksPerTrigger, start_block, start_parent_hash, confirmations, finality, endpoints, maxBatchSize, parallelism, timeout, maxRetries",
				"unknown ethrpc option %q", k)
		}
		if prev, dup := seen[canon]; dup || len(vals[k]) > 1 {
			if !dup {
				prev = k
			}
			return Options{}, errcode.New(CodeInvalidOption, "", "give each option once", "ethrpc option %q given more than once (%s)", canon, prev)
		}
		seen[canon] = k
		v := vals[k][0]
		bad := func(err error) error {
			return errcode.Wrap(err, CodeInvalidOption, "", "", "ethrpc option %s=%q", k, v)
		}
		switch canon {
		case "maxBlocksPerTrigger":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return Options{}, bad(err)
			}
			o.MaxBlocksPerTrigger = n
		case "start_block":
			if o.StartBlock, err = strconv.ParseUint(v, 10, 63); err != nil {
				return Options{}, bad(err)
			}
		case "start_parent_hash":
			if o.StartParentHash, err = normHex(v, 32); err != nil {
				return Options{}, bad(err)
			}
		case "confirmations":
			if o.Confirmations, err = strconv.ParseUint(v, 10, 32); err != nil {
				return Options{}, bad(err)
			}
		case "finality":
			if v != "" && v != "safe" && v != "finalized" {
				return Options{}, bad(nil)
			}
			o.Finality = v
		case "endpoints":
			for _, e := range strings.Split(v, ",") {
				if e = strings.TrimSpace(e); e == "" {
					continue
				}
				if err := checkEndpoint(e); err != nil {
					return Options{}, err
				}
				o.Endpoints = append(o.Endpoints, e)
			}
		case "maxBatchSize":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return Options{}, bad(err)
			}
			o.MaxBatchSize = n
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return Options{}, bad(err)
			}
			o.Timeout = d
		case "parallelism":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return Options{}, bad(err)
			}
			o.Parallelism = n
		case "maxRetries":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return Options{}, bad(err)
			}
			o.MaxRetries = n
		}
	}
	if len(o.Endpoints) == 0 {
		return Options{}, errcode.New(CodeInvalidOption, "", "give an endpoint, e.g. ethrpc:http://127.0.0.1:8545", "ethrpc URI %q names no endpoint", redact(uri))
	}
	return o, nil
}

func checkEndpoint(e string) error {
	u, err := url.Parse(e)
	if err == nil && u.Host == "" {
		err = errorString("no host")
	}
	if err == nil {
		switch u.Scheme {
		case "http", "https", "ws", "wss":
		default:
			err = errorString("scheme must be http, https, ws or wss")
		}
	}
	if err != nil {
		return errcode.Wrap(err, CodeInvalidOption, "", "give an http(s):// or ws(s):// JSON-RPC URL", "ethrpc endpoint %q", redact(e))
	}
	return nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// redact keeps scheme and host of a URL: provider URLs carry API keys in
// their path or query, which must not reach logs or progress events.
func redact(e string) string {
	u, err := url.Parse(e)
	if err != nil || u.Host == "" {
		return "<unparsable url>"
	}
	s := u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		s += "/…"
	}
	return s
}
