//go:build linux

package durable

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// primeAnon fills the pool of dir's file system and waits until it is full,
// so that the next publishes to dir take the anonymous path.
func primeAnon(t *testing.T, dir string) {
	t.Helper()
	if !anonEnabled {
		t.Skip("no /proc/self/fd: anonymous temp files are off")
	}
	if f := anonFiles.take(dir); f != nil {
		f.Close()
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		anonFiles.mu.Lock()
		full, off := false, false
		for _, d := range anonFiles.byDev {
			if d.dir == dir {
				full, off = len(d.files) >= anonPoolSize, d.off
			}
		}
		anonFiles.mu.Unlock()
		if off {
			t.Skip("the file system of " + dir + " refuses O_TMPFILE")
		}
		if full {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the anonymous file pool did not fill")
		}
	}
}

// recordSteps records the anonymous publish steps (anonHook) until the test
// ends.
func recordSteps(t *testing.T) func() []string {
	var mu sync.Mutex
	var steps []string
	anonHook = func(s string) {
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, s)
	}
	t.Cleanup(func() { anonHook = nil })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(steps)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestAnonPublish publishes through an anonymous file on the real disk: the
// put-if-absent of NoOverwrite, a failed write or wait leaving nothing, and
// never a temp name in the directory.
func TestAnonPublish(t *testing.T) {
	dir := t.TempDir()
	primeAnon(t, dir)
	steps := recordSteps(t)
	p := For(vfs.Default)
	res, err := Bytes(p, dir, "x", Options{}, []byte("one"))
	if err != nil || res.Size != 3 || res.Temp != "" || !res.Visible {
		t.Fatalf("publish = %+v, %v", res, err)
	}
	if got := steps(); !slices.Equal(got, []string{"written", "named", "synced", "published", "done"}) {
		t.Fatalf("steps %v: not the anonymous path", got)
	}
	if _, err := Bytes(p, dir, "x", Options{}, []byte("two")); !errors.Is(err, ErrExists) {
		t.Fatalf("second no-overwrite publish: %v, want ErrExists", err)
	}
	boom := errors.New("boom")
	if res, err := p.Publish(dir, "y", Options{}, func(w io.Writer) error {
		_, _ = w.Write([]byte("partial"))
		return boom
	}); !errors.Is(err, boom) || res.Visible || res.Temp != "" {
		t.Fatalf("failed write: %+v, %v", res, err)
	}
	if res, err := Bytes(p, dir, "z", Options{Wait: func() error { return boom }}, []byte("z")); !errors.Is(err, boom) || res.Visible || res.Temp != "" {
		t.Fatalf("failed wait: %+v, %v", res, err)
	}
	for _, v := range []string{"r1", "r2"} {
		if _, err := Bytes(p, dir, "r", Options{Mode: Replace}, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "x")); string(b) != "one" {
		t.Fatalf("x = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "r")); string(b) != "r2" {
		t.Fatalf("r = %q after two replaces", b)
	}
	if names := listDir(t, dir); !slices.Equal(names, []string{"r", "x"}) {
		t.Fatalf("dir holds %v, want [r x]", names)
	}
	// x: 5 steps; x again and y: none (refused before the write, failed
	// write); z: 3 (its wait fails); r twice: 5 each.
	if got := steps(); len(got) != 18 || slices.Contains(got[5:8], "published") {
		t.Fatalf("steps %v: a refused publish published, or one did not take the anonymous path", got)
	}
}

// TestAnonPublishRace: of writers racing for one name, exactly one wins and
// the file holds its bytes.
func TestAnonPublishRace(t *testing.T) {
	dir := t.TempDir()
	primeAnon(t, dir)
	steps := recordSteps(t)
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = Bytes(For(vfs.Default), dir, "x", Options{}, []byte(fmt.Sprint("writer ", i))) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Fatalf("writers %d and %d both published", winner, i)
		case !errors.Is(err, ErrExists):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer published")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "x")); string(b) != fmt.Sprint("writer ", winner) {
		t.Fatalf("x = %q, writer %d won", b, winner)
	}
	if !slices.Contains(steps(), "published") {
		t.Fatal("no publish took the anonymous path")
	}
	if names := listDir(t, dir); !slices.Equal(names, []string{"x"}) {
		t.Fatalf("dir holds %v, want [x]", names)
	}
}

// TestAnonPublishDirGone: the pool's files were opened in a directory since
// removed; a publish to another directory of the file system still links
// them there.
func TestAnonPublishDirGone(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	primeAnon(t, a)
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	steps := recordSteps(t)
	for i := range anonPoolSize + 2 {
		if _, err := Bytes(For(vfs.Default), b, fmt.Sprint(i), Options{}, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(steps(), "published") {
		t.Fatal("no publish took the anonymous path")
	}
	if names := listDir(t, b); len(names) != anonPoolSize+2 {
		t.Fatalf("b holds %v", names)
	}
}

// TestAnonPublishKilled kills a process at every step of a publish through
// an anonymous file (and in the middle of its write): before the final link
// the name holds nothing and the directory at most a temp file (which
// RemoveTemps removes), after it the name holds the whole file.
func TestAnonPublishKilled(t *testing.T) {
	if at := os.Getenv("DURABLE_ANON_KILL_AT"); at != "" {
		killedPublish(t, os.Getenv("DURABLE_ANON_DIR"), at)
		return
	}
	payload := killPayload()
	for _, at := range []string{"mid-write", "written", "named", "synced", "published", "done"} {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestAnonPublishKilled$", "-test.count=1")
		cmd.Env = append(os.Environ(), "DURABLE_ANON_KILL_AT="+at, "DURABLE_ANON_DIR="+dir)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("kill at %s: the child was not killed: %v\n%s", at, err, out)
		}
		var temps, others []string
		for _, n := range listDir(t, dir) {
			if IsTemp(n) {
				temps = append(temps, n)
			} else {
				others = append(others, n)
			}
		}
		b, readErr := os.ReadFile(filepath.Join(dir, "x"))
		wantTemps := 0
		switch at {
		case "named", "synced", "published":
			wantTemps = 1
		}
		switch {
		case len(temps) != wantTemps:
			t.Fatalf("killed at %s: temp files %v, want %d", at, temps, wantTemps)
		case at == "published" || at == "done":
			if !slices.Equal(others, []string{"x"}) || readErr != nil || !bytes.Equal(b, payload) {
				t.Fatalf("killed at %s: dir holds %v, x has %d bytes (%v), want the %d published", at, others, len(b), readErr, len(payload))
			}
		case len(others) != 0:
			t.Fatalf("killed at %s: dir holds %v, want no published name", at, others)
		}
		if removed, err := RemoveTemps(vfs.Default, dir); err != nil || len(removed) != wantTemps {
			t.Fatalf("killed at %s: RemoveTemps removed %v, %v", at, removed, err)
		}
	}
}

// killPayload is more than the publish buffer, so the write flushes mid-way.
func killPayload() []byte {
	return bytes.Repeat([]byte("0123456789abcdef"), 3*bufferSize/16)
}

// killedPublish runs in the child of TestAnonPublishKilled: it publishes
// dir/x through the anonymous path and is killed at step at.
func killedPublish(t *testing.T, dir, at string) {
	primeAnon(t, dir)
	kill := func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }
	anonHook = func(s string) {
		if s == at {
			kill()
		}
	}
	payload := killPayload()
	_, err := For(vfs.Default).Publish(dir, "x", Options{}, func(w io.Writer) error {
		half := len(payload) / 2
		if _, err := w.Write(payload[:half]); err != nil {
			return err
		}
		if at == "mid-write" {
			kill()
		}
		_, err := w.Write(payload[half:])
		return err
	})
	t.Fatalf("not killed at %s (publish: %v)", at, err)
}

// TestAnonFillFollowsTake: a take that names another dir while a fill is
// opening a file in a dir since removed (a previous test's) gets the pool
// filled there, not left short: that take started no fill of its own.
func TestAnonFillFollowsTake(t *testing.T) {
	if !anonEnabled {
		t.Skip("no /proc/self/fd: anonymous temp files are off")
	}
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pool := &anonPool{byDev: map[uint64]*anonDev{}}
	var once sync.Once
	pool.fillHook = func(dir string) {
		if dir != a {
			return
		}
		once.Do(func() {
			if err := os.RemoveAll(a); err != nil {
				t.Error(err)
			}
			if f := pool.take(b); f != nil {
				f.Close()
			}
		})
	}
	if f := pool.take(a); f != nil {
		t.Fatal("a new pool had a file")
	}
	var full bool
	var dir string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		pool.mu.Lock()
		var filling, off bool
		for _, d := range pool.byDev {
			filling, off, full, dir = d.filling, d.off, len(d.files) >= anonPoolSize, d.dir
		}
		pool.mu.Unlock()
		if off {
			t.Skip("the file system of " + root + " refuses O_TMPFILE")
		}
		if !filling || time.Now().After(deadline) {
			break
		}
	}
	if !full || dir != b {
		t.Fatalf("after the fill: full %v, dir %q; want a full pool for %q", full, dir, b)
	}
	pool.mu.Lock()
	for _, d := range pool.byDev {
		for _, f := range d.files {
			f.Close()
		}
	}
	pool.mu.Unlock()
}
