//go:build !linux

package s3serve

import (
	"os"

	"github.com/ethstream/ethstream/storage/internal/rawsock"
)

// connLoop reports whether the connection loop serves here: not without
// openat2 and sendfile at an offset (net/http serves every request).
const connLoop = false

func (s *Server) serveFast(*rawsock.Conn, connRequest, []byte) (served, keep bool, _ []byte) {
	return false, true, nil
}

func localFS(*os.File) bool { return false }
