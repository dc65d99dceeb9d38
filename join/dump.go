package join

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

func init() { state.RegisterValueRenderer(OperatorName, renderValue) }

// renderValue is the text `ethstream state dump` prints in a join state's
// value column: format 1's JSON ({"value":n}, or the row's columns then
// "matched"), whichever format the value is stored in, so the dump of a
// format-2 state reads as the dump of a format-1 one did.
func renderValue(schema state.Schema, key, val []any) ([]any, error) {
	if len(key) < 2 || len(val) != 1 {
		return val, fmt.Errorf("join state row has %d key and %d value fields", len(key), len(val))
	}
	sideText, _ := key[0].(string)
	store, _ := key[1].(string)
	text, _ := val[0].(string)
	if !strings.HasPrefix(text, string(rune(formatBinary))) {
		return val, nil // format 1: the text itself
	}
	enc := state.AppendStringValue(nil, text)
	switch store {
	case StoreKeyToNumValues:
		n, err := decodeCount(enc)
		if err != nil {
			return val, err
		}
		val[0] = `{"value":` + strconv.FormatInt(n, 10) + `}`
		return val, nil
	case StoreKeyWithIndexToValue:
		fields, err := specFieldsCache.get(schema.Spec)
		if err != nil {
			return val, err
		}
		side := stream.LeftSide
		if sideText == sideName(stream.RightSide) {
			side = stream.RightSide
		}
		r, matched, err := decodeRowBinary(fields[side], text)
		if err != nil {
			return val, err
		}
		val[0] = string(rowText(fields[side], r, matched))
		return val, nil
	}
	return val, fmt.Errorf("join state row of unknown store %q", store)
}

// specFieldsCache keeps the last spec's side columns: a dump renders every
// row of one state version, whose spec is one.
var specFieldsCache fieldsCache

type fieldsCache struct {
	mu     sync.Mutex
	spec   string
	fields [2][]stream.Field
}

func (c *fieldsCache) get(spec string) ([2][]stream.Field, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spec == spec && c.fields[0] != nil {
		return c.fields, nil
	}
	f, err := specSideFields(spec)
	if err != nil {
		return f, err
	}
	c.spec, c.fields = spec, f
	return f, nil
}
