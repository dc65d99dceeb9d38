package files

import (
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sources/ddl"
)

// defaultPartitionName is Hive's and Spark's name of a null partition value.
const defaultPartitionName = "__HIVE_DEFAULT_PARTITION__"

// CodeConflictingPartitions is Spark's error class for files whose
// directories name different partition columns.
const CodeConflictingPartitions = "CONFLICTING_PARTITION_COLUMN_NAMES"

// partValue is one key=value directory of a file's path.
type partValue struct {
	name  string
	value string
	null  bool
}

// parsePartitions returns the key=value directories of rel (a file's path
// below the root, "/"-separated) as Spark's PartitioningUtils.parsePartition
// finds them: from the file's directory up, stopping at the first
// directory that is not key=value once some were found; names and values
// are unescaped (Spark escapes them in paths). Order: outermost first.
func parsePartitions(rel string) []partValue {
	dirs := strings.Split(rel, "/")
	dirs = dirs[:len(dirs)-1] // the file name
	var out []partValue
	for i := len(dirs) - 1; i >= 0; i-- {
		k, v, ok := strings.Cut(dirs[i], "=")
		if !ok || k == "" {
			if len(out) > 0 {
				break
			}
			continue
		}
		name, err1 := url.PathUnescape(k)
		val, err2 := url.PathUnescape(v)
		if err1 != nil || err2 != nil {
			name, val = k, v
		}
		out = append(out, partValue{name: name, value: val, null: val == defaultPartitionName || v == ""})
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// inferPartitionType is Spark's inferPartitionColumnValue with type
// inference on: int, bigint, decimal (an integer beyond bigint), double,
// date, timestamp, else string; a null value says nothing (ok false).
func inferPartitionType(v partValue) (ddl.Kind, bool) {
	if v.null {
		return 0, false
	}
	s := v.value
	if _, err := strconv.ParseInt(s, 10, 32); err == nil {
		return ddl.Int, true
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ddl.Long, true
	}
	if isInteger(s) {
		return ddl.Decimal, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXpP_") && !math.IsInf(f, 0) || s == "NaN" || s == "Infinity" || s == "-Infinity" {
		return ddl.Double, true
	}
	if isDate(s) {
		return ddl.Date, true
	}
	if _, ok := parseDefaultTimestamp(s); ok && strings.ContainsAny(s, ": ") {
		return ddl.Timestamp, true
	}
	return ddl.String, true
}

func isInteger(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isDate reports whether s is yyyy-MM-dd (Spark's partition date form).
func isDate(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	_, ok := parseDefaultTimestamp(s)
	return ok
}

// widerPartitionType merges two inferred partition types as Spark's
// findWiderTypeForPartitionColumn: equal stays, int and bigint widen to
// bigint, numbers to double, anything else to string.
func widerPartitionType(a, b ddl.Kind) ddl.Kind {
	if a == b {
		return a
	}
	num := func(k ddl.Kind) int {
		switch k {
		case ddl.Int:
			return 1
		case ddl.Long:
			return 2
		case ddl.Decimal:
			return 3
		case ddl.Double:
			return 4
		}
		return 0
	}
	na, nb := num(a), num(b)
	switch {
	case na == 0 || nb == 0:
		return ddl.String
	case na <= 2 && nb <= 2:
		return ddl.Long
	case na == 3 && nb <= 3 || nb == 3 && na <= 3:
		return ddl.Decimal
	}
	return ddl.Double
}

// discovered is the partition columns of a listing: names in path order
// and each one's inferred type.
type discovered struct {
	names []string
	kinds []ddl.Kind // 0: every value null (a string)
}

// discoverPartitions finds the partition columns of rels (files below the
// root) as Spark does at a streaming source's start: every file must name
// the same columns in the same order (CONFLICTING_PARTITION_COLUMN_NAMES
// otherwise), and each column's type is the widest of its values'.
func discoverPartitions(root string, rels []string) (discovered, error) {
	var d discovered
	for i, rel := range rels {
		ps := parsePartitions(rel)
		names := make([]string, len(ps))
		for j, p := range ps {
			names[j] = p.name
		}
		if i == 0 {
			d.names = names
			d.kinds = make([]ddl.Kind, len(names))
		} else if !equalFold(names, d.names) {
			return d, errcode.New(CodeConflictingPartitions, root,
				"keep one partition layout under the source's directory (key=value directories of the same keys in the same order), or set recursiveFileLookup=true to read every file without partition columns",
				"conflicting partition column names detected: [%s] for %s and [%s] for %s", strings.Join(d.names, ", "), rels[0], strings.Join(names, ", "), rel)
		}
		for j, p := range ps {
			k, ok := inferPartitionType(p)
			if !ok {
				continue
			}
			if d.kinds[j] == 0 {
				d.kinds[j] = k
			} else {
				d.kinds[j] = widerPartitionType(d.kinds[j], k)
			}
		}
	}
	return d, nil
}

func equalFold(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.EqualFold(a[i], b[i]) {
			return false
		}
	}
	return true
}
