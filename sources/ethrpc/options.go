package ethrpc

import (
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethtables"
)

// Defaults applied by New to zero-valued Options fields.
const (
	DefaultMaxBlocksPerTrigger = 20
	DefaultMaxBatchSize        = 100
	DefaultTimeout             = 10 * time.Second
	DefaultBatchTimeout        = 30 * time.Second
	DefaultMaxRetries          = 8
	DefaultParallelism         = 4
	DefaultReorgDepth          = 64
	// DefaultMaxResponseSize caps one JSON-RPC answer (maxResponseSize):
	// a batch of 100 headers is about 60 KiB, so 64 MiB is three orders of
	// magnitude of headroom, and a node streaming a 2 GiB answer is cut
	// off after 64 MiB instead of being read into memory (884 MB RSS, seen).
	DefaultMaxResponseSize = 64 << 20
	// MaxReorgDepth bounds reorgDepth: the history file holds reorgDepth+1
	// blocks and is rewritten every batch.
	MaxReorgDepth = 4096
)

// Reorg modes (Options.Reorg).
const (
	// ReorgFail stops with REORG_DETECTED when the chain no longer contains
	// a block the source emitted (the default).
	ReorgFail = "fail"
	// ReorgRetract retracts the orphaned blocks (rows with Sign -1) and
	// emits their canonical replacements in the same batch.
	ReorgRetract = "retract"
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
	// BatchTimeout bounds everything one LatestOffset or ReadBatch asks of
	// the endpoints, retries and backoff included (default 30s): an endpoint
	// that accepts connections and never answers fails the batch with
	// RPC_UNAVAILABLE after this long, not after every retry's timeout.
	BatchTimeout time.Duration
	// Parallelism bounds the batch requests in flight for one range (default
	// 4); a range is split so that each gets at least 25 blocks.
	Parallelism int
	// Reorg is "" or ReorgFail (stop with REORG_DETECTED), or ReorgRetract.
	Reorg string
	// ReorgDepth is the deepest reorganisation ReorgRetract undoes (default
	// 64 blocks); deeper ones are REORG_DETECTED. Only with ReorgRetract.
	ReorgDepth int
	// MaxResponseSize caps the bytes of one JSON-RPC answer (default
	// DefaultMaxResponseSize): a larger one is RPC_RESPONSE_TOO_LARGE,
	// naming the endpoint and the cap, and is read no further.
	MaxResponseSize int64
	// Subscribe is "" or SubscribeAuto (follow eth_subscribe("newHeads") over
	// the first ws:// or wss:// endpoint, which wakes trigger realTime), or
	// SubscribeOff (only poll). Blocks are always read by number and checked.
	Subscribe string
	// Table is the table the source emits: "" or "blocks" (block rows,
	// package ethblock), or transactions, logs or token_transfers (package
	// ethtables), each block's rows read by its hash (table.go).
	Table string
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
	"timeout":      "timeout",
	"batchTimeout": "batchTimeout", "batch_timeout": "batchTimeout",
	"maxRetries": "maxRetries", "max_retries": "maxRetries",
	"parallelism": "parallelism",
	"reorg":       "reorg",
	"reorgDepth":  "reorgDepth", "reorg_depth": "reorgDepth",
	"maxResponseSize": "maxResponseSize", "max_response_size": "maxResponseSize",
	"subscribe": "subscribe",
	"table":     "table",
}

// ParseURI parses the source URI of `ethstream run --source NAME=ethrpc:URI`:
// an endpoint URL whose query string holds the source options, e.g.
// "http://127.0.0.1:8545?maxBlocksPerTrigger=20&start_block=26086570&confirmations=0".
// Options: maxBlocksPerTrigger, start_block, start_parent_hash, confirmations,
// finality (safe|finalized), endpoints (comma-separated further URLs, tried in
// order after the URI's own), maxBatchSize, parallelism, timeout (Go duration),
// batchTimeout (Go duration), maxRetries, reorg (fail|retract), reorgDepth,
// maxResponseSize (bytes, or with a KiB, MiB or GiB suffix), subscribe
// (auto|off: follow newHeads over the first ws(s) endpoint, or only poll),
// table (blocks|transactions|logs|token_transfers: the rows emitted).
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
		canon, err := canonicalKey(k, vals[k], seen)
		if err != nil {
			return Options{}, err
		}
		if err := uriSetters[canon](&o, k, vals[k][0]); err != nil {
			return Options{}, err
		}
	}
	if len(o.Endpoints) == 0 {
		return Options{}, errcode.New(CodeInvalidOption, "", "give an endpoint, e.g. ethrpc:http://127.0.0.1:8545", "ethrpc URI %q names no endpoint", redact(uri))
	}
	return o, nil
}

// validOptions is the remedy of an unknown option.
const validOptions = "valid options: maxBlocksPerTrigger, start_block, start_parent_hash, confirmations, finality, endpoints, maxBatchSize, parallelism, timeout, batchTimeout, maxRetries, reorg, reorgDepth, maxResponseSize, subscribe"

// canonicalKey maps an option spelling to its canonical name, refusing an
// unknown option and one given twice (under either spelling).
func canonicalKey(k string, vs []string, seen map[string]string) (string, error) {
	canon, ok := uriKeys[k]
	if !ok {
		return "", errcode.New(CodeInvalidOption, "", validOptions, "unknown ethrpc option %q", k)
	}
	if prev, dup := seen[canon]; dup || len(vs) > 1 {
		if !dup {
			prev = k
		}
		return "", errcode.New(CodeInvalidOption, "", "give each option once", "ethrpc option %q given more than once (%s)", canon, prev)
	}
	seen[canon] = k
	return canon, nil
}

// badOption names what option k takes; the parser's own text (strconv
// internals) is not shown.
func badOption(k, v, want string) error {
	return errcode.New(CodeInvalidOption, "", fmt.Sprintf("pass %s=<%s>", k, want), "ethrpc option %s=%q: want %s", k, v, want)
}

// positiveInt parses a positive integer option.
func positiveInt(k, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, badOption(k, v, "a positive integer")
	}
	return n, nil
}

// positiveDuration parses a positive Go duration option; eg is an example.
func positiveDuration(k, v, eg string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, badOption(k, v, "a positive duration, e.g. "+eg)
	}
	return d, nil
}

// uriSetters parse one option (by canonical name) into Options; k is the
// spelling the user gave, for the error.
var uriSetters = map[string]func(o *Options, k, v string) error{
	"maxBlocksPerTrigger": func(o *Options, k, v string) (err error) {
		o.MaxBlocksPerTrigger, err = positiveInt(k, v)
		return err
	},
	"start_block": func(o *Options, k, v string) (err error) {
		if o.StartBlock, err = strconv.ParseUint(v, 10, 63); err != nil {
			return badOption(k, v, "a block number (a non-negative integer)")
		}
		return nil
	},
	"start_parent_hash": func(o *Options, k, v string) (err error) {
		if o.StartParentHash, err = normHex(v, 32); err != nil {
			return errcode.New(CodeInvalidOption, "", remedyParentHash, "ethrpc option %s=%q: want a 0x-prefixed 32-byte hex hash", k, v)
		}
		return nil
	},
	"confirmations": func(o *Options, k, v string) (err error) {
		if o.Confirmations, err = strconv.ParseUint(v, 10, 32); err != nil {
			return badOption(k, v, "a non-negative integer, e.g. 12")
		}
		return nil
	},
	"finality": func(o *Options, k, v string) error {
		if v != "" && v != "safe" && v != "finalized" {
			return badOption(k, v, "safe or finalized")
		}
		o.Finality = v
		return nil
	},
	"endpoints": func(o *Options, _, v string) error {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			if err := checkEndpoint(e); err != nil {
				return err
			}
			o.Endpoints = append(o.Endpoints, e)
		}
		return nil
	},
	"maxBatchSize": func(o *Options, k, v string) (err error) {
		o.MaxBatchSize, err = positiveInt(k, v)
		return err
	},
	"timeout": func(o *Options, k, v string) (err error) {
		o.Timeout, err = positiveDuration(k, v, "10s")
		return err
	},
	"batchTimeout": func(o *Options, k, v string) (err error) {
		o.BatchTimeout, err = positiveDuration(k, v, "30s")
		return err
	},
	"parallelism": func(o *Options, k, v string) (err error) {
		o.Parallelism, err = positiveInt(k, v)
		return err
	},
	"reorg": func(o *Options, k, v string) error {
		if v != ReorgFail && v != ReorgRetract {
			return errcode.New(CodeInvalidOption, "", "use reorg=fail (the default) or reorg=retract", "ethrpc option %s=%q", k, v)
		}
		o.Reorg = v
		return nil
	},
	"reorgDepth": func(o *Options, k, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > MaxReorgDepth {
			return errcode.Wrap(err, CodeInvalidOption, "", fmt.Sprintf("use a depth from 1 to %d", MaxReorgDepth), "ethrpc option %s=%q", k, v)
		}
		o.ReorgDepth = n
		return nil
	},
	"maxResponseSize": func(o *Options, k, v string) error {
		n, ok := parseSize(v)
		if !ok {
			return badOption(k, v, "a positive size in bytes, or with a KiB, MiB or GiB suffix, e.g. 64MiB")
		}
		o.MaxResponseSize = n
		return nil
	},
	"maxRetries": func(o *Options, k, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badOption(k, v, "a non-negative integer")
		}
		o.MaxRetries = n
		return nil
	},
	"table": func(o *Options, k, v string) error {
		if v != "blocks" && !slices.Contains(ethtables.Names, v) {
			return errcode.New(CodeInvalidOption, "", "use table=blocks (the default), transactions, logs or token_transfers", "ethrpc option %s=%q", k, v)
		}
		o.Table = v
		return nil
	},
	"subscribe": func(o *Options, k, v string) error {
		if v != SubscribeAuto && v != SubscribeOff {
			return errcode.New(CodeInvalidOption, "", "use subscribe=auto (the default) or subscribe=off", "ethrpc option %s=%q", k, v)
		}
		o.Subscribe = v
		return nil
	},
}

// parseSize reads a positive byte count: digits, optionally followed by
// KiB, MiB or GiB.
func parseSize(v string) (int64, bool) {
	shift := 0
	for suffix, sh := range map[string]int{"KiB": 10, "MiB": 20, "GiB": 30} {
		if strings.HasSuffix(v, suffix) {
			v, shift = strings.TrimSuffix(v, suffix), sh
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)>>shift {
		return 0, false
	}
	return n << shift, true
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
