package filelog

import "sort"

// sortLatestFirst orders files newest first, ties by URI (stable, so equal
// times keep the caller's order).
func sortLatestFirst(objs []Object) {
	sort.SliceStable(objs, func(i, j int) bool {
		return objs[i].ModTime.After(objs[j].ModTime)
	})
}
