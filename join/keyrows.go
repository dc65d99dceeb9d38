package join

import (
	"slices"
	"strings"

	"github.com/ethstream/ethstream/errcode"
)

// keyRows is the stored rows of one join key on one side as the batch
// sees them: read from the state once, then changed in memory, and
// written back once at Finish (flush), so a key the batch touches many
// times costs one read of each value, at most one write of each changed
// value and one of its keyToNumValues.
type keyRows struct {
	key    string // the encoded join key
	rows   []storedRow
	stored int64 // values the state holds (indexes 0..stored-1)
	dirty  bool  // a row was added, changed, moved or removed
}

// storedRow is one keyWithIndexToValue value.
type storedRow struct {
	r       row
	matched bool
	changed bool // its value at its index must be written
}

// keyRowsOf returns the batch's rows of (side, key), reading them from
// the state on first use. key is copied when kept.
func (o *Operator) keyRowsOf(side int, key []byte) (*keyRows, error) {
	if k, ok := o.keys[side][string(key)]; ok {
		return k, nil
	}
	k := &keyRows{key: string(key)}
	o.sk = stateKey(o.sk[:0], side, StoreKeyToNumValues, key, 0, false)
	v, ok, err := o.store.Get(o.sk)
	if err != nil {
		return nil, o.stateErr("read", err)
	}
	if ok {
		if k.stored, err = decodeCount(v); err != nil {
			return nil, o.stateErr("read", err)
		}
	}
	if k.stored > 0 {
		k.rows = make([]storedRow, k.stored)
	}
	sp := &o.p.sides[side]
	for idx := range k.stored {
		o.sk = stateKey(o.sk[:0], side, StoreKeyWithIndexToValue, key, idx, true)
		v, ok, err := o.store.Get(o.sk)
		if err != nil {
			return nil, o.stateErr("read", err)
		}
		if !ok {
			return nil, errcode.Corrupt("", nil, "%s: state of the %s side has no value %d of a key it counts", o.p, sideName(side), idx)
		}
		r, m, err := decodeRow(sp.Schema.Fields, sp.fast, v)
		if err != nil {
			return nil, o.stateErr("read", err)
		}
		k.rows[idx] = storedRow{r: r, matched: m}
	}
	o.keys[side][k.key] = k
	return k, nil
}

// add appends a row to the key's values.
func (k *keyRows) add(r row, matched bool) {
	k.rows = append(k.rows, storedRow{r: r, matched: matched, changed: true})
	k.dirty = true
}

// flush writes the batch's changes to every key of both sides: each
// changed value once, the indexes an eviction emptied deleted, and each
// key's keyToNumValues once if its count changed. Keys are written in
// their encoded order (deterministic writes; the store sorts anyway).
func (o *Operator) flush() error {
	sp := [2]*sidePlan{&o.p.sides[0], &o.p.sides[1]}
	for side := range o.keys {
		ks := make([]*keyRows, 0, len(o.keys[side]))
		for _, k := range o.keys[side] {
			if k.dirty {
				ks = append(ks, k)
			}
		}
		slices.SortFunc(ks, func(a, b *keyRows) int { return strings.Compare(a.key, b.key) })
		for _, k := range ks {
			for idx := range k.rows {
				sr := &k.rows[idx]
				if !sr.changed {
					continue
				}
				o.sk = stateKey(o.sk[:0], side, StoreKeyWithIndexToValue, k.key, int64(idx), true)
				o.vb = encodeRow(o.vb[:0], sp[side].Schema.Fields, sr.r, sr.matched)
				if err := o.store.Put(o.sk, o.vb); err != nil {
					return o.stateErr("write", err)
				}
				sr.changed = false
				o.put++
			}
			n := int64(len(k.rows))
			for idx := n; idx < k.stored; idx++ {
				o.sk = stateKey(o.sk[:0], side, StoreKeyWithIndexToValue, k.key, idx, true)
				if err := o.store.Delete(o.sk); err != nil {
					return o.stateErr("write", err)
				}
			}
			if n != k.stored {
				o.sk = stateKey(o.sk[:0], side, StoreKeyToNumValues, k.key, 0, false)
				var err error
				if n == 0 {
					err = o.store.Delete(o.sk)
				} else {
					err = o.store.Put(o.sk, encodeCount(n))
				}
				if err != nil {
					return o.stateErr("write", err)
				}
			}
			k.stored, k.dirty = n, false
		}
	}
	return nil
}
