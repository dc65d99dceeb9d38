// Package s3serve is ethstream's embedded S3 endpoint: it serves a directory
// over the S3 REST API, for tests, the demo and the bench (ethstream
// serve-s3), with no knowledge of what the objects hold.
//
// Start serves a directory with gofakes3: bucket = top-level folder,
// path-style requests, ListObjectsV2 (prefix, delimiter, MaxKeys,
// continuation tokens), GET with ranges (the file is seeked, only the range
// is read), HEAD, PUT (durable publish: rename, or link(2) for If-None-Match: *),
// DELETE. A plain GET or HEAD of an object (no conditional header, a
// bytes=N-[M] range or none) is answered before gofakes3, with the same
// headers, the range sent by sendfile(2): on Linux, without signatures or
// faults, by the connection loop (conn.go) before net/http, byte for byte
// net/http's answer, its system calls raw where they cannot block
// (conn_linux.go), else by the middleware (serveObject). A key that resolves outside the
// root through a symbolic link is 403 AccessDenied; a GET or HEAD checks
// the real path of the file it opened. ETags derive from size, mtime and
// key rather than an MD5 of the content. Faults: a seeded fraction of
// requests answered 503 SlowDown or 500 InternalError. A listing is one
// moment of the bucket against the server's own writes (listGuard).
package s3serve
