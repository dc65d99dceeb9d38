package join

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
	"unsafe"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// keyRows is the stored rows of one join key on one side as the operator
// sees them: read from the state once, changed in memory through the
// batch, and written back once at Finish (flush), so a key the batch
// touches many times costs one read of each value, at most one write of
// each changed value and one of its keyToNumValues.
type keyRows struct {
	key    string // the encoded join key
	mh     uint64 // keyHash(key): its slot in the side's keyTable
	rows   []storedRow
	stored int64 // values the state holds (indexes 0..stored-1)
	// hash is the state's KeyHash of the key's values' prefix (the side's
	// keyWithIndexToValue prefix and key), once hashed: a value's key
	// hash continues it over the index (valueKey).
	hash uint64
	// counted: the state holds the key's keyToNumValues (format 3 writes
	// it for a key of two values or more only; format 2 wrote it for every
	// key, and a state written so keeps it until the key's count changes).
	counted bool
	dirty   bool // listed in Operator.dirty: a row was added, changed, moved or removed
	hashed  bool
	// one holds the rows of a key added with one row (most keys: a block
	// hash joined with its child), an allocation fewer a stored row.
	one [1]storedRow
}

// storedRow is one keyWithIndexToValue value.
type storedRow struct {
	r       row
	matched bool
	changed bool // its value at its index must be written
}

// sideMem is what the operator holds in memory of one side's state,
// between batches too: the keys it read or wrote (all of them while
// complete) and the eviction index. It reflects the state after the
// batch Operator.memFor (the committed version once that batch commits)
// and is dropped whenever the store's version is another (an aborted or
// failed batch, a repartition, a reopen).
type sideMem struct {
	keys keyTable
	rows int // rows in keys
	// complete: keys holds every stored row of the side, so a key not in
	// it has none and costs no state read. Set by the scan that loads the
	// side when it holds at most memRowsCap rows; lost (keys emptied) when
	// the side grows beyond.
	complete bool
	idx      *evictIndex // nil on a side that never evicts
	// ahead sums what evictSide's loads ahead read (Operator.ahead; a
	// side's own, as the sides evict on two goroutines).
	ahead uintptr
}

// memRowsCap bounds the rows a side keeps in memory across batches
// (about 0.5 KB each for a blocks-shaped row): a join whose watermark
// keeps its state small holds all of it, one that keeps rows for ever
// reads them from the state.
var memRowsCap = 100_000

var errScanEnough = errors.New("join: scan stopped")

// loadSide builds side's memory from the committed state by one scan of
// its values: the eviction index of an evicting side (every row), and
// every key's rows while the side holds at most memRowsCap rows. The scan
// meets a key's indexes in partition order; a key's rows are put in
// index order after.
func (o *Operator) loadSide(side int) error {
	m := &sideMem{}
	if col := o.evcol[side]; col >= 0 {
		m.idx = &evictIndex{}
	}
	type indexed struct {
		idx int64
		sr  storedRow
	}
	groups, building := map[string][]indexed{}, true
	rows := 0
	prefix := stateKeyPrefix(side, StoreKeyWithIndexToValue)
	// The prefix ends with the store name's terminator 0x00 0x01; every
	// key of the store sorts below the same bytes ending 0x00 0x02.
	upper := slices.Clone(prefix)
	upper[len(upper)-1]++
	sp := &o.p.sides[side]
	idxField := []state.Field{{Name: ColIndex, Type: stream.Int64, Nullable: true}}
	err := o.store.Scan(prefix, upper, func(k, v []byte) error {
		if !bytes.HasPrefix(k, prefix) || len(k) < len(prefix)+9 {
			return nil
		}
		r, matched, err := decodeRow(sp.Schema.Fields, sp.fast, v)
		if err != nil {
			return err
		}
		jk := string(k[len(prefix) : len(k)-9])
		if m.idx != nil {
			m.idx.add(jk, r[o.evcol[side]])
		}
		if !building {
			return nil
		}
		if rows++; rows > memRowsCap {
			building, groups = false, nil
			if m.idx == nil {
				return errScanEnough
			}
			return nil
		}
		ir, err := state.DecodeKey(idxField, k[len(k)-9:])
		if err != nil {
			return err
		}
		idx, _ := ir[0].(int64)
		groups[jk] = append(groups[jk], indexed{idx, storedRow{r: r, matched: matched}})
		return nil
	})
	if err != nil && !errors.Is(err, errScanEnough) {
		return o.stateErr("scan", err)
	}
	if building {
		// The keys the state counts (keyToNumValues: in format 3 those of
		// two values or more, in format 2 every key), which flush must
		// rewrite or delete when their count changes.
		counted := map[string]int64{}
		cprefix := stateKeyPrefix(side, StoreKeyToNumValues)
		cupper := slices.Clone(cprefix)
		cupper[len(cupper)-1]++
		err := o.store.Scan(cprefix, cupper, func(k, v []byte) error {
			if !bytes.HasPrefix(k, cprefix) || len(k) < len(cprefix)+1 {
				return nil
			}
			n, err := decodeCount(v)
			if err != nil {
				return err
			}
			counted[string(k[len(cprefix):len(k)-1])] = n
			return nil
		})
		if err != nil {
			return o.stateErr("scan", err)
		}
		for jk, g := range groups {
			slices.SortFunc(g, func(a, b indexed) int { return cmp.Compare(a.idx, b.idx) })
			k := &keyRows{key: jk, mh: keyHashString(jk), rows: make([]storedRow, len(g)), stored: int64(len(g))}
			if n, ok := counted[jk]; ok {
				if n != k.stored {
					return errcode.Corrupt("", nil, "%s: state of the %s side counts %d values of a key that has %d", o.p, sideName(side), n, k.stored)
				}
				k.counted = true
				delete(counted, jk)
			}
			for i, x := range g {
				if x.idx != int64(i) {
					return errcode.Corrupt("", nil, "%s: state of the %s side holds index %d of a key at position %d", o.p, sideName(side), x.idx, i)
				}
				k.rows[i] = x.sr
			}
			m.keys.insert(k, -1)
			m.rows += len(g)
		}
		if len(counted) > 0 {
			return errcode.Corrupt("", nil, "%s: state of the %s side counts the values of %d keys that have none", o.p, sideName(side), len(counted))
		}
		m.complete = true
	}
	o.mem[side] = m
	return nil
}

// noRows is what keyRowsOf returns for a key without rows that it does not
// keep: read only (nothing is written to a key without rows), shared
// rather than allocated for each probe that misses.
var noRows keyRows

// keyRowsOf returns the rows of (side, key), whose keyHash is h, reading
// them from the state when memory does not hold them. key is copied when
// kept, unless same
// holds its bytes ("" if nothing does): the other side's keyRows of the
// same key, so that both sides' rows of a key (a block's hash, joined
// with its child's parent_hash) share one copy. A key without rows is
// kept only if add (the caller adds one): a probe of the other side
// leaves no entry behind for a key it did not find.
func (o *Operator) keyRowsOf(side int, key []byte, h uint64, add bool, same string) (*keyRows, error) {
	m := o.mem[side]
	k, slot := m.keys.find(key, h)
	if k != nil {
		return k, nil
	}
	if m.complete && !add {
		return &noRows, nil
	}
	k = o.slab.keyRows()
	k.key, k.mh = same, h
	if same != string(key) {
		k.key = o.slab.key(key)
	}
	k.rows = k.one[:0:1]
	if !m.complete {
		if err := o.read(side, k); err != nil {
			return nil, err
		}
	}
	if len(k.rows) > 0 || add {
		m.keys.insert(k, slot)
		m.rows += len(k.rows)
	}
	return k, nil
}

// read reads k's values from the state: value 0 first, whose absence
// means none (a key with values has indexes 0..n-1, in every format), so
// a key without rows costs one read; then the count, whose absence means
// one value (format 3 counts a key of two values or more only).
func (o *Operator) read(side int, k *keyRows) error {
	sp := &o.p.sides[side]
	get := func(idx int64) (bool, error) {
		o.sk = stateKey(o.sk[:0], side, StoreKeyWithIndexToValue, k.key, idx, true)
		v, ok, err := o.store.Get(o.sk)
		if err != nil || !ok {
			return false, o.stateErr("read", err)
		}
		r, m, err := decodeRow(sp.Schema.Fields, sp.fast, v)
		if err != nil {
			return false, o.stateErr("read", err)
		}
		k.rows = append(k.rows, storedRow{r: r, matched: m})
		return true, nil
	}
	if ok, err := get(0); err != nil || !ok {
		return err
	}
	k.stored = 1
	o.sk = stateKey(o.sk[:0], side, StoreKeyToNumValues, k.key, 0, false)
	v, ok, err := o.store.Get(o.sk)
	if err != nil {
		return o.stateErr("read", err)
	}
	if ok {
		if k.stored, err = decodeCount(v); err != nil {
			return o.stateErr("read", err)
		}
		if k.stored < 1 {
			return errcode.Corrupt("", nil, "%s: state of the %s side counts %d values of a key that has value 0", o.p, sideName(side), k.stored)
		}
		k.counted = true
	}
	k.rows = slices.Grow(k.rows, int(k.stored)-1)
	for idx := int64(1); idx < k.stored; idx++ {
		ok, err := get(idx)
		if err != nil {
			return err
		}
		if !ok {
			return errcode.Corrupt("", nil, "%s: state of the %s side has no value %d of a key it counts", o.p, sideName(side), idx)
		}
	}
	return nil
}

// touch lists k for flush.
func (o *Operator) touch(side int, k *keyRows) {
	if !k.dirty {
		k.dirty = true
		o.dirty[side] = append(o.dirty[side], k)
	}
}

// flush writes the batch's changes to every key of both sides (telling
// the store which keys its committed version holds: a key's stored count
// and indexes 0..stored-1, so that it looks none of them up): each
// changed value once, the indexes an eviction emptied deleted, and each
// key's keyToNumValues once if its count changed, in the order the batch
// first changed the keys (the store sorts its pending writes at commit).
// Each is the batch's only write of its state key (a key is listed in
// dirty once, its indexes written or deleted once each, and flush runs
// once a batch, after every read): the store appends them without
// looking them up (state.Store.PutFirstHashed). Memory then keeps what it
// may (sideMem).
func (o *Operator) flush() error {
	for side := range o.dirty {
		ks := o.dirty[side]
		fields := o.p.sides[side].Schema.Fields
		m := o.mem[side]
		hashKeys(side, ks)
		for _, k := range ks {
			for idx := range k.rows {
				sr := &k.rows[idx]
				if !sr.changed {
					continue
				}
				h := o.valueKey(side, k, int64(idx))
				o.vb = encodeRow(o.vb[:0], fields, sr.r, sr.matched)
				if err := o.store.PutFirstHashed(o.sk, o.vb, int64(idx) < k.stored, h); err != nil {
					return o.stateErr("write", err)
				}
				sr.changed = false
				o.put++
			}
			n := int64(len(k.rows))
			for idx := n; idx < k.stored; idx++ {
				h := o.valueKey(side, k, idx)
				if err := o.store.DeleteFirstHashed(o.sk, true, h); err != nil {
					return o.stateErr("write", err)
				}
			}
			// Format 3 counts a key of two values or more only: most keys
			// of a join hold one row, and their count was half the state's
			// writes (doc.go, State layout).
			counted := n >= 2
			if counted && (n != k.stored || !k.counted) || !counted && k.counted {
				o.sk = stateKey(o.sk[:0], side, StoreKeyToNumValues, k.key, 0, false)
				var err error
				if counted {
					o.cb = appendCount(o.cb[:0], n)
					err = o.store.PutFirstHashed(o.sk, o.cb, k.counted, state.KeyHash(o.sk))
				} else {
					err = o.store.DeleteFirstHashed(o.sk, true, state.KeyHash(o.sk))
				}
				if err != nil {
					return o.stateErr("write", err)
				}
			}
			k.counted = counted
			m.rows += int(n - k.stored)
			k.stored, k.dirty = n, false
			if n == 0 {
				// Only eviction removes rows; it leaves the key for
				// flush to drop (evictSide).
				m.keys.remove(k)
			}
		}
		clear(ks)
		o.dirty[side] = ks[:0]
		if m.rows > memRowsCap {
			// Too many to keep: read keys from the state again.
			m.keys, m.rows, m.complete = keyTable{}, 0, false
		}
	}
	return nil
}

// valueKey sets o.sk to the state key of k's value idx and returns its
// KeyHash, continued from k's (hashing a value's whole key was half of the
// pending writes' lookups: each stored row is written once and deleted
// once, a key of about 95 bytes each time).
func (o *Operator) valueKey(side int, k *keyRows, idx int64) uint64 {
	o.sk = stateKey(o.sk[:0], side, StoreKeyWithIndexToValue, k.key, idx, true)
	pre := keyPrefixOf(side, StoreKeyWithIndexToValue)
	end := len(pre) + len(k.key)
	if !k.hashed {
		k.hash, k.hashed = state.KeyHashMore(valuePrefixHash[side], o.sk[len(pre):end]), true
	}
	return state.KeyHashMore(k.hash, o.sk[end:])
}

// hashKeys sets the hash valueKey continues of each key of ks not hashed
// yet, four keys side by side (state.KeyHashMore4: one key's FNV pass
// waits on each byte's multiply, and a backfill's batch hashes each of
// its keys once, 5% of the join leg's CPU).
func hashKeys(side int, ks []*keyRows) {
	var q [4]*keyRows
	n := 0
	for _, k := range ks {
		if k.hashed {
			continue
		}
		q[n] = k
		if n++; n < len(q) {
			continue
		}
		q[0].hash, q[1].hash, q[2].hash, q[3].hash = state.KeyHashMore4(valuePrefixHash[side],
			bytesOf(q[0].key), bytesOf(q[1].key), bytesOf(q[2].key), bytesOf(q[3].key))
		for _, k := range q {
			k.hashed = true
		}
		n = 0
	}
	for _, k := range q[:n] {
		k.hash, k.hashed = state.KeyHashMore(valuePrefixHash[side], bytesOf(k.key)), true
	}
}

// bytesOf is a read-only view of s's bytes (never write through it).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// valuePrefixHash is each side's keyWithIndexToValue prefix's KeyHash.
var valuePrefixHash = [2]uint64{
	state.KeyHash(keyPrefixOf(0, StoreKeyWithIndexToValue)),
	state.KeyHash(keyPrefixOf(1, StoreKeyWithIndexToValue)),
}

// dropMem forgets every side's memory: the next batch loads it from the
// committed state.
func (o *Operator) dropMem() {
	o.mem = [2]*sideMem{}
	o.dirty = [2][]*keyRows{}
}

// useMem loads each side's memory unless it reflects the committed state.
func (o *Operator) useMem() error {
	if o.memFor != o.store.Version() {
		o.dropMem()
		o.memFor = o.store.Version()
	}
	for side := range o.mem {
		if o.mem[side] == nil {
			if err := o.loadSide(side); err != nil {
				o.dropMem()
				return err
			}
		}
	}
	return nil
}
