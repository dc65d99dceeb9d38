package engine

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
)

// settings are the parsed session confs.
type settings struct {
	evolution     bool
	evolutionSet  bool
	formatVersion int // 0 = unset
	shuffle       int // 0 = unset
	stateParts    int // 0 = unset
	minRetain     int
	noDataBatches bool
	// watermarkPolicy is spark.sql.streaming.multipleWatermarkPolicy,
	// lower case; "" when unset.
	watermarkPolicy string
	providerClass   string
	providerSet     bool
	shuffleExplicit bool
	// warnings name spark.sql.streaming.* and spark.sql.shuffle* keys the
	// engine does not read and that are not a typo of one it does: Spark
	// accepts any key, so they pass, with a warning.
	warnings []string
}

// DefaultShufflePartitions is the state partition count of a new checkpoint
// when neither partition conf is set (Spark's default).
const DefaultShufflePartitions = 200

// MaxStatePartitions is the largest state partition count any conf or
// `checkpoint repartition --partitions` accepts. An operator whose partitions
// hold file descriptors may allow fewer (stream.PartitionLimiter).
const MaxStatePartitions = 10000

// KnownConfs are the conf keys the engine reads (docs/contracts.md, Configuration).
var KnownConfs = []string{
	checkpoint.ConfShufflePartitions, checkpoint.ConfSourceEvolution, checkpoint.ConfOffsetLogVersion,
	checkpoint.ConfStatePartitions, checkpoint.ConfProviderClass, checkpoint.ConfMinBatchesToRetain,
	checkpoint.ConfNoDataBatches, checkpoint.ConfMultipleWatermarkPolicy,
	// Read by the SQL front end (package query, through the pipeline): the
	// engine only checks that each is a boolean, so a typo of one is refused
	// like a typo of the engine's own keys.
	ConfANSI, ConfGroupByAliases, ConfGroupByOrdinal,
	// Read by plugins the pipeline builds (the file source, the file
	// sink): checked for their type here so that a typo is refused and the
	// keys are not warned about as unknown.
	ConfSchemaInference, ConfFileSinkCompactInterval,
}

// The Spark SQL confs the query front end reads (their meaning is in
// package query and docs/contracts.md, Configuration). The engine does not
// import the front end, so the keys are spelled here too; a test checks
// they are query's.
const (
	ConfANSI           = "spark.sql.ansi.enabled"
	ConfGroupByAliases = "spark.sql.groupByAliases"
	ConfGroupByOrdinal = "spark.sql.groupByOrdinal"

	// ConfSchemaInference is read by the file sources (sources/files).
	ConfSchemaInference = "spark.sql.streaming.schemaInference"
	// ConfFileSinkCompactInterval is read by the file sink (sink/files).
	ConfFileSinkCompactInterval = "spark.sql.streaming.fileSink.log.compactInterval"
)

// ValidateConf checks a session conf the way every start does: a malformed
// value of a known key is INVALID_ARGUMENT, and so is an unknown key within
// typoDistance edits of a known one (a typo would silently run the batch
// with the default, which the checkpoint then pins). Any other unknown key
// is accepted, as Spark does; a spark.sql.streaming.* or spark.sql.shuffle*
// one is returned as a warning. It is pure: `run`, `plan` and the CLI's
// flag parsing call it before anything is opened.
func ValidateConf(conf map[string]string) (warnings []string, err error) {
	s, err := parseSettings(conf)
	return s.warnings, err
}

// parseSettings reads the session conf; malformed values are INVALID_ARGUMENT.
func parseSettings(conf map[string]string) (settings, error) {
	s := settings{minRetain: checkpoint.DefaultMinBatchesToRetain, noDataBatches: true}
	// Keys in order, so the first bad one reported is deterministic.
	keys := make([]string, 0, len(conf))
	for k := range conf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := conf[k]
		var err error
		switch k {
		case checkpoint.ConfSourceEvolution:
			s.evolution, err = parseBool(k, v)
			s.evolutionSet = true
		case checkpoint.ConfOffsetLogVersion:
			s.formatVersion, err = parseInt(k, v, 1, checkpoint.MaxOffsetsVer)
		case checkpoint.ConfShufflePartitions:
			s.shuffle, err = parseInt(k, v, 1, MaxStatePartitions)
			s.shuffleExplicit = true
		case checkpoint.ConfStatePartitions:
			s.stateParts, err = parseInt(k, v, 1, MaxStatePartitions)
		case checkpoint.ConfMinBatchesToRetain:
			s.minRetain, err = parseInt(k, v, 1, 1<<31-1)
		case checkpoint.ConfNoDataBatches:
			s.noDataBatches, err = parseBool(k, v)
		case checkpoint.ConfMultipleWatermarkPolicy:
			// Spark reads the policy's name case-insensitively.
			s.watermarkPolicy = strings.ToLower(strings.TrimSpace(v))
			if s.watermarkPolicy != policyMin && s.watermarkPolicy != policyMax {
				err = badConf(k, v, "min or max")
			}
		case ConfANSI, ConfGroupByAliases, ConfGroupByOrdinal, ConfSchemaInference:
			_, err = parseBool(k, v)
		case ConfFileSinkCompactInterval:
			_, err = parseInt(k, v, 1, 1<<31-1)
		case checkpoint.ConfProviderClass:
			s.providerClass, s.providerSet = v, true
			if v != checkpoint.ProviderPebble {
				err = badConf(k, v, `"pebble" (the only state store provider)`)
			}
		default:
			var w string
			if w, err = unknownConf(k); w != "" {
				s.warnings = append(s.warnings, w)
			}
		}
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

func badConf(k, v, want string) error {
	return errcode.New(errcode.InvalidArgument, "", fmt.Sprintf("pass --conf %s=<%s>", k, want), "conf %s=%q: want %s", k, v, want)
}

func parseBool(k, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badConf(k, v, "true or false")
	}
	return b, nil
}

func parseInt(k, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		return 0, badConf(k, v, fmt.Sprintf("an integer from %d to %d", lo, hi))
	}
	return n, nil
}

// typoDistance is the most edits between an unknown conf key and a known
// one for the unknown key to be taken as its typo: two keys the engine reads
// are at least 10 edits apart, so 3 never makes a typo ambiguous.
const typoDistance = 3

// unknownConf decides a key the engine does not read: within typoDistance
// edits of a known key (case aside) it is a typo, INVALID_ARGUMENT naming the
// known key; another spark.sql.streaming.* or spark.sql.shuffle* key is a
// warning (a Spark key ethstream does not implement); any other key (another
// engine's, a user's own) passes silently, as in Spark.
func unknownConf(k string) (warning string, err error) {
	best, dist := closestConf(k)
	if dist <= typoDistance {
		return "", errcode.New(errcode.InvalidArgument, "", fmt.Sprintf("pass --conf %s=VALUE (run --help lists the confs ethstream reads)", best),
			"unknown conf %s: did you mean %s?", k, best)
	}
	if strings.HasPrefix(k, "spark.sql.streaming.") || strings.HasPrefix(k, "spark.sql.shuffle") {
		return fmt.Sprintf("unknown conf %s is ignored; did you mean %s?", k, best), nil
	}
	return "", nil
}

// closestConf is the known key nearest to k and its edit distance.
func closestConf(k string) (string, int) {
	best, dist := "", -1
	for _, known := range KnownConfs {
		if d := editDistance(strings.ToLower(k), strings.ToLower(known)); dist < 0 || d < dist {
			best, dist = known, d
		}
	}
	return best, dist
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
