package s3serve

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openBeneath opens rel under dir with openat2(2) and RESOLVE_BENEATH: the
// kernel follows rel's symbolic links and fails (EXDEV) any resolution
// that leaves dir, in one syscall. ok is false when it cannot vouch for
// the path (a link leaving dir, an absolute link even one inside it, a
// missing file, a kernel before 5.6, dir closed): the caller then checks
// the slow way. The descriptor is used under Control, so a concurrent
// Close of dir cannot hand its number to another file meanwhile.
func openBeneath(dir *os.File, rel string) (f *os.File, ok bool) {
	fd, ok := openBeneathFD(dir, rel)
	if !ok {
		return nil, false
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir.Name(), rel)), true
}

// beneathHow is how every open of a served file is confined: read-only,
// resolved beneath the root, no magic links (openBeneathFD; openCached
// adds its own flags to it).
var beneathHow = unix.OpenHow{
	Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_LARGEFILE,
	Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
}

// openBeneathFD is openBeneath's descriptor, for a caller that reads it
// with system calls alone (serveFast: no *os.File, its fcntl and cleanup).
func openBeneathFD(dir *os.File, rel string) (fd int, ok bool) {
	rc, err := dir.SyscallConn()
	if err != nil {
		return -1, false
	}
	var oerr error
	if err := rc.Control(func(dirfd uintptr) {
		how := beneathHow
		fd, oerr = unix.Openat2(int(dirfd), rel, &how)
	}); err != nil || oerr != nil {
		return -1, false
	}
	return fd, true
}
