package state

// mergeHeap is the binary min-heap of a k-way merge's cursors, ordered by
// less: the smallest cursor is items[0]. A repartition merges ~200 sorted
// runs per new partition and the ~11 files of a delta chain with it. It is
// not safe for concurrent use.
type mergeHeap[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (h *mergeHeap[T]) len() int { return len(h.items) }

// top returns the smallest cursor; the heap must not be empty.
func (h *mergeHeap[T]) top() T { return h.items[0] }

func (h *mergeHeap[T]) push(x T) {
	h.items = append(h.items, x)
	for i := len(h.items) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			break
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

// fixTop restores the order after the top cursor advanced.
func (h *mergeHeap[T]) fixTop() {
	n := len(h.items)
	for i := 0; ; {
		small := i
		if l := 2*i + 1; l < n && h.less(h.items[l], h.items[small]) {
			small = l
		}
		if r := 2*i + 2; r < n && h.less(h.items[r], h.items[small]) {
			small = r
		}
		if small == i {
			return
		}
		h.items[i], h.items[small] = h.items[small], h.items[i]
		i = small
	}
}

// popTop removes the top cursor (it is exhausted).
func (h *mergeHeap[T]) popTop() {
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	var zero T
	h.items[n] = zero
	h.items = h.items[:n]
	h.fixTop()
}
