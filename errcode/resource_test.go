package errcode

import (
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

type needErr struct{ error }

func (needErr) NeededBytes() int64 { return 4096 }
func (e needErr) Unwrap() error    { return e.error }

func TestResource(t *testing.T) {
	full := fmt.Errorf("publish: %w", needErr{&fs.PathError{Op: "write", Path: "/ckpt/offsets/.3.x.tmp", Err: syscall.ENOSPC}})
	e := Resource(full)
	if e == nil || e.Code != DiskFull || e.Path != "/ckpt/offsets/.3.x.tmp" || !strings.Contains(e.Error(), "4096 more bytes") {
		t.Fatalf("ENOSPC: %v", e)
	}
	e = Resource(&fs.PathError{Op: "open", Path: "/t/x", Err: syscall.EMFILE})
	if e == nil || e.Code != TooManyOpenFiles || e.Path != "/t/x" {
		t.Fatalf("EMFILE: %v", e)
	}
	if Resource(fmt.Errorf("other: %w", syscall.EIO)) != nil || Resource(nil) != nil {
		t.Fatal("EIO classified as an exhausted resource")
	}
}
