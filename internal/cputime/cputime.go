// Package cputime reads the CPU time (user + system) a process has used:
// this one's from getrusage(2), another's from /proc/PID/stat (Linux). On a
// shared machine wall time says more about the other tenants than about the
// code measured, so the benchmarks and `ethstream bench` report both.
package cputime

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Self returns this process's user+system CPU time so far (0 if the kernel
// does not say).
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTicks is the unit of /proc/PID/stat's CPU times: USER_HZ, 100 on
// every Linux the kernel ABI allows user space to see.
const clockTicks = 100

// Of returns the user+system CPU time so far of the running process pid.
func Of(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read the CPU time of process %d: %w", pid, err)
	}
	return parseStat(string(b))
}

// parseStat parses utime and stime out of a /proc/PID/stat line; the
// command name, in parentheses, may hold spaces and parentheses itself.
func parseStat(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no command name in /proc/PID/stat")
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat has %d fields after the command name, want 13 or more", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/PID/stat: %w", err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
