package stream

import (
	"fmt"
	"sync/atomic"
)

// # Lending a batch past the call
//
// A chunk a source emits, or an operator is handed, is the callee's during
// the call only (Source.ReadBatch's emit, Operator.Process): the producer
// re-uses its storage (its slices, its strings' bytes) for a later chunk
// once the call returns. A producer may instead lend the chunk (Lend):
// its storage then stays unchanged until every reference is released. The
// producer holds one reference, which it releases when the call returns
// (Release) instead of re-using the storage; a consumer that would read
// the chunk after the call returns takes one of its own (Retain) and
// releases it once done. The last Release hands the batch back to the
// producer (Lend's back), whose free list re-uses it from then on; while
// it is retained the producer takes another buffer.
//
// Retain is false for a batch nobody lent: the consumer must then be done
// with it before the call returns, as before. A step between the producer
// and the consumer that passes the lent storage on in a Batch of its own
// (a wrapper adding a column of storage it never rewrites) shares the
// lending (ShareLending); a step that copies or filters the rows into a
// buffer it re-uses does not, and its output is not lent. Retain,
// Release and the back function may run on any goroutine.

// lending is a lent batch's reference count and how it goes back.
type lending struct {
	refs atomic.Int32
	back func(*Batch)
	b    *Batch // the batch lent (back's argument)
}

// Lend marks b as lent by its producer, who holds its one reference, and
// returns b; back(b) runs on the last Release (nil: the storage is left to
// the garbage collector). Lend re-uses b's record of an earlier lending:
// a batch back from its last Release may be lent again without allocating.
// It panics if b is still retained (a producer re-using a lent buffer: a
// bug).
func Lend(b *Batch, back func(*Batch)) *Batch {
	l := b.lent
	if l == nil || l.b != b {
		l = &lending{b: b}
	} else if n := l.refs.Load(); n != 0 {
		panic(fmt.Sprintf("stream: a lent batch re-used with %d references", n))
	}
	l.back = back
	l.refs.Store(1)
	b.lent = l
	return b
}

// ShareLending makes wrapper, a Batch whose rows are in's storage (plus
// storage its maker never rewrites), lent as in is: retaining wrapper
// retains in. A no-op if in is not lent.
func ShareLending(wrapper, in *Batch) {
	wrapper.lent = in.lent
}

// Retain takes a reference to b's storage, which stays unchanged until
// the matching Release; false (nothing taken) if b is not lent.
func (b *Batch) Retain() bool {
	l := b.lent
	if l == nil {
		return false
	}
	if l.refs.Add(1) <= 1 {
		panic("stream: Retain of a batch already handed back")
	}
	return true
}

// Release drops a reference taken by Lend or Retain; the last one hands
// the batch back to its producer. A no-op if b is not lent.
func (b *Batch) Release() {
	l := b.lent
	if l == nil {
		return
	}
	switch n := l.refs.Add(-1); {
	case n == 0:
		if l.back != nil {
			l.back(l.b)
		}
	case n < 0:
		panic("stream: Release of a batch already handed back")
	}
}

// Lent reports whether b's storage is lent and still referenced: a
// producer's check before it re-uses a buffer.
func (b *Batch) Lent() bool {
	return b.lent != nil && b.lent.refs.Load() > 0
}
