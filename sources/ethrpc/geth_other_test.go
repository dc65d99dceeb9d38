//go:build !linux

package ethrpc

import "os/exec"

// dieWithParent: only Linux has a parent-death signal; elsewhere the
// test's cleanup kills the process.
func dieWithParent(*exec.Cmd) {}
