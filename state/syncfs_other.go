//go:build !linux

package state

import "syscall"

// syncCacheFS makes every file written under dir durable before the cache
// marker claims them: sync(2) where syncfs(2) does not exist.
func syncCacheFS(string) { syscall.Sync() }
