package s3serve

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/internal/listen"
	"github.com/johannesboyne/gofakes3"
)

// CodeRootNotFound: the directory to serve does not exist.
const CodeRootNotFound = "S3_ROOT_NOT_FOUND"

// Options configures Start.
type Options struct {
	Root   string // each top-level folder of Root is a bucket
	Addr   string // listen address; "127.0.0.1:0" picks a free port
	Faults Faults
	// AccessKey and SecretKey, when set (both or neither), make the
	// endpoint verify AWS Signature Version 4 on every request (s3auth.go):
	// an unsigned request or a wrong key or signature is 403. Without them
	// it serves anyone who reaches it (Authenticated says which).
	AccessKey, SecretKey string

	// noConnLoop leaves every request to net/http (tests compare the
	// connection loop's answers with net/http's).
	noConnLoop bool
}

// Faults injects failures into a fraction of requests, drawn from a
// seeded generator so a test's failure pattern is reproducible for the same
// request order.
type Faults struct {
	ThrottleRate float64 // fraction answered 503 SlowDown
	ErrorRate    float64 // fraction answered 500 InternalError
	Seed         int64
}

// Server is an S3-compatible endpoint over a directory, served by gofakes3
// with a filesystem backend of our own (see dirBackend). It is safe for
// concurrent use.
type Server struct {
	url      string
	root     string // Root, absolute, its symlinks resolved
	backend  *dirBackend
	auth     *sigV4 // nil: unauthenticated
	srv      *http.Server
	ln       net.Listener
	requests atomic.Int64
	done     chan struct{}
	// conns is the connection loop's (conn.go); nil when net/http reads
	// every connection (an endpoint verifying signatures).
	conns *connTracker
	// faulty is whether faults are injected: the loop then leaves every
	// request to the middleware, which draws them.
	faulty atomic.Bool
	// loopServed counts the requests the connection loop answered.
	loopServed atomic.Int64

	mu     sync.Mutex
	faults Faults
	rnd    *rand.Rand
}

// Start serves Root on Addr until Close or until ctx is done. A busy port
// is ADDRESS_IN_USE; a missing Root is S3_ROOT_NOT_FOUND.
func Start(ctx context.Context, o Options) (*Server, error) {
	st, err := os.Stat(o.Root)
	if err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return nil, errcode.Wrap(err, CodeRootNotFound, o.Root, "pass --root DIR with the archive (e.g. the --out of gen-archive)", "cannot serve directory")
	}
	root, err := filepath.Abs(o.Root)
	if err == nil {
		// Containment is judged on real paths: the root's own symlinks
		// (a /tmp that is a link) resolved once.
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", o.Root, err)
	}
	if (o.AccessKey == "") != (o.SecretKey == "") {
		return nil, errcode.New(errcode.InvalidArgument, "", "give both the access key and the secret key, or neither (an unauthenticated endpoint)",
			"the S3 endpoint was given an access key or a secret key alone")
	}
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := listen.TCP(addr)
	if err != nil {
		return nil, err
	}
	rootDir, err := os.Open(root)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("open %s: %w", o.Root, err)
	}
	backend := &dirBackend{root: root, rootDir: rootDir, localRoot: localFS(rootDir)}
	fake := gofakes3.New(backend,
		gofakes3.WithTimeSkewLimit(0),
		gofakes3.WithoutVersioning(),
		gofakes3.WithLogger(gofakes3.DiscardLog()),
	)
	s := &Server{url: "http://" + ln.Addr().String(), root: root, backend: backend, ln: ln, done: make(chan struct{})}
	if o.AccessKey != "" {
		s.auth = &sigV4{accessKey: o.AccessKey, secretKey: o.SecretKey, now: time.Now}
	}
	s.SetFaults(o.Faults)
	s.srv = &http.Server{Handler: s.middleware(fake.Server()), ReadHeaderTimeout: headTimeout}
	var served net.Listener = ln
	var loop sync.WaitGroup
	if connLoop && s.auth == nil && !o.noConnLoop {
		s.conns = &connTracker{hand: newHandoffListener(ln.Addr())}
		served = s.conns.hand
		loop.Go(func() { s.acceptLoop(ln) })
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(served)
		loop.Wait()
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// URL is the endpoint, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.url }

// Authenticated reports whether the endpoint verifies SigV4 signatures.
func (s *Server) Authenticated() bool { return s.auth != nil }

// SetFaults replaces the fault injection settings.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
	s.faulty.Store(f.ThrottleRate > 0 || f.ErrorRate > 0)
	s.rnd = rand.New(rand.NewPCG(uint64(f.Seed), 0x53335333))
}

// Requests is the number of HTTP requests received so far, failed ones
// included.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Close stops the server and waits for it to exit.
func (s *Server) Close() error {
	err := s.srv.Close()
	if s.conns != nil {
		s.ln.Close()
		s.conns.closeAll()
	}
	<-s.done
	s.backend.rootDir.Close() // a second Close's ErrClosed means nothing
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// middleware counts the request, verifies its signature (with
// credentials), refuses a key that resolves outside the root, and injects
// the configured faults, before gofakes3 sees the request; a plain GET or
// HEAD of an object it answers itself (serveObject).
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if s.auth != nil {
			if err := s.auth.verify(r); err != nil {
				var ae *authError
				if errors.As(err, &ae) {
					s3Error(w, http.StatusForbidden, ae.code, ae.msg)
					return
				}
				s3Error(w, http.StatusForbidden, "AccessDenied", err.Error())
				return
			}
		}
		// obj is the object of a GET or HEAD, opened and confined once here
		// (nil when it does not open: gofakes3 answers why).
		var obj *os.File
		bucket, key, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if ok && key != "" && filepath.IsLocal(filepath.FromSlash(bucket+"/"+key)) {
			var err error
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				if p, perr := s.backend.objectPath(bucket, key); perr == nil {
					obj, err = s.backend.openConfined(p)
				}
			} else if out, _ := outside(s.root, filepath.Join(s.root, bucket, filepath.FromSlash(key))); out {
				err = errOutside
			}
			if errors.Is(err, errOutside) {
				s3Error(w, http.StatusForbidden, "AccessDenied", errOutside.Error())
				return
			}
			if obj != nil {
				defer obj.Close()
			}
		}
		s.mu.Lock()
		u := s.rnd.Float64()
		f := s.faults
		s.mu.Unlock()
		switch {
		case u < f.ThrottleRate:
			s3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
			return
		case u < f.ThrottleRate+f.ErrorRate:
			s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
			return
		}
		if obj != nil && serveObject(w, r, key, obj) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>ethstream</RequestId></Error>`, code, msg)
}

// dirBackend is a gofakes3.Backend over a plain directory: bucket = top-level
// folder, key = '/'-joined relative path. gofakes3's own s3afero backend does
// not paginate listings (it lists everything on every page) and computes an
// MD5 of each whole file for its ETag, which for a 4,080-file archive means
// re-reading gigabytes per listing; this backend paginates in key order and
// derives the ETag from the file's size and modification time (S3 ETags are
// opaque; multipart ones are not MD5s either). Ranged GETs seek the file and
// stream only the range.
//
// Files named ".*.tmp" are writes in progress and are not listed. Writes are
// published by package durable (temp file, fsync, rename, or link(2) for
// If-None-Match: *, directory fsync), so readers never see a partial object.
// A client's key whose last segment has that shape (a dead writer's temp
// object, which ethstream's sweep must see and remove, as on any S3 server)
// is stored under an escaped file name (fileName, keyName), so the backend's
// own writes in progress and a client's keys never share a name.
// Safe for concurrent use.
type dirBackend struct {
	root string
	// rootDir is root as opened at start, for openBeneath (nil: not
	// used). GET and HEAD resolve keys from it, so a root directory renamed
	// away while serving (rather than emptied) would still be served.
	rootDir *os.File
	// localRoot: rootDir is on a local file system (localFS), whose
	// files the connection loop may open with raw system calls.
	localRoot bool
	// guard makes a listing one moment against this backend's writes.
	guard listGuard
	// readDir reads a directory for a listing (nil: os.ReadDir). Tests
	// give one that answers as POSIX allows a read that a write overlaps.
	readDir func(dir string) ([]fs.DirEntry, error)
	// validNames remembers up to maxValidNames bucket names that
	// gofakes3.ValidateBucketName passed: its regular expressions were 5%
	// of the endpoint's CPU a ranged GET.
	validNames sync.Map
	nValid     atomic.Int32
}

// maxValidNames bounds validNames against a client naming many buckets.
const maxValidNames = 64

// validBucket reports whether gofakes3 deems name a valid bucket name.
func (b *dirBackend) validBucket(name string) bool {
	if _, ok := b.validNames.Load(name); ok {
		return true
	}
	if gofakes3.ValidateBucketName(name) != nil {
		return false
	}
	if b.nValid.Add(1) <= maxValidNames {
		b.validNames.Store(name, struct{}{})
	}
	return true
}

var _ gofakes3.Backend = (*dirBackend)(nil)

func (b *dirBackend) bucketDir(bucket string) (string, error) {
	if !b.validBucket(bucket) {
		return "", gofakes3.BucketNotFound(bucket)
	}
	return filepath.Join(b.root, bucket), nil
}

func (b *dirBackend) objectPath(bucket, key string) (string, error) {
	dir, err := b.bucketDir(bucket)
	if err != nil {
		return "", err
	}
	if key == "" || !filepath.IsLocal(filepath.FromSlash(key)) || strings.HasSuffix(key, "/") {
		return "", gofakes3.KeyNotFound(key)
	}
	d, f := path.Split(key)
	return filepath.Join(dir, filepath.FromSlash(d), fileName(f)), nil
}

// escapeMark prefixes the file name of a key's last segment that is
// temp-shaped or itself starts with the mark: key ".x.tmp" is file
// "%.x.tmp", key "%a" is file "%%a"; every other key is its own file name,
// so a tree written by hand (an archive, a table) is served as it is.
const escapeMark = "%"

// fileName is the file name of a key's last segment.
func fileName(seg string) string {
	if isTemp(seg) || strings.HasPrefix(seg, escapeMark) {
		return escapeMark + seg
	}
	return seg
}

// keyName is the key segment of a file name, the inverse of fileName.
func keyName(file string) string {
	if rest, ok := strings.CutPrefix(file, escapeMark); ok && (isTemp(rest) || strings.HasPrefix(rest, escapeMark)) {
		return rest
	}
	return file
}

func etag(key string, st fs.FileInfo) []byte {
	return etagOf(nil, key, st.Size(), st.ModTime())
}

// etagOf appends to b the ETag of key's file of size bytes last modified
// at mod.
func etagOf(b []byte, key string, size int64, mod time.Time) []byte {
	h := md5.New()
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], uint64(size))
	binary.BigEndian.PutUint64(buf[8:], uint64(mod.UnixNano()))
	h.Write(buf[:])
	h.Write([]byte(key))
	return h.Sum(b)
}

// appendETag appends etagOf's hex form.
func appendETag(b []byte, key string, size int64, mod time.Time) []byte {
	var sum [md5.Size]byte
	return hex.AppendEncode(b, etagOf(sum[:0], key, size, mod))
}

func isTemp(name string) bool { return strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") }

func (b *dirBackend) ListBuckets() ([]gofakes3.BucketInfo, error) {
	des, err := os.ReadDir(b.root)
	if err != nil {
		return nil, err
	}
	var out []gofakes3.BucketInfo
	for _, de := range des {
		if !de.IsDir() || gofakes3.ValidateBucketName(de.Name()) != nil {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		out = append(out, gofakes3.BucketInfo{Name: de.Name(), CreationDate: gofakes3.NewContentTime(info.ModTime())})
	}
	return out, nil
}

func (b *dirBackend) BucketExists(name string) (bool, error) {
	dir, err := b.bucketDir(name)
	if err != nil {
		return false, nil
	}
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st.IsDir(), nil
}

type listedObject struct {
	key string
	st  fs.FileInfo
}

// ListBucket lists keys in byte order after page.Marker, grouping by the
// delimiter. A truncated page ends at NextMarker; when that is a common
// prefix, the next page skips every key under it.
//
// The tree is walked in key order (walkKeys) and the walk stops once the
// page is full: a page costs the directories it lists plus those on the way
// to the marker, not the whole bucket. (Walking everything per page made
// one listing of a 4,080-file archive, five pages of 1,000, read every
// directory five times.)
func (b *dirBackend) ListBucket(name string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	dir, err := b.bucketDir(name)
	if err != nil {
		return nil, err
	}
	var pfx, delim string
	if prefix != nil {
		pfx, delim = prefix.Prefix, prefix.Delimiter
	}
	// Walk only the deepest directory the prefix names.
	start, rel := dir, ""
	if i := strings.LastIndex(pfx, "/"); i >= 0 {
		sub := pfx[:i]
		if !filepath.IsLocal(filepath.FromSlash(sub)) {
			return gofakes3.NewObjectList(), nil
		}
		start, rel = filepath.Join(dir, filepath.FromSlash(sub)), pfx[:i+1]
	}
	// Entries in key order: a key, or the common prefix it rolls up into.
	// Keys sharing a common prefix are contiguous, so entries stay sorted.
	type entry struct {
		name   string
		prefix bool
		obj    listedObject
	}
	var entries []entry
	marker := ""
	if page.HasMarker {
		marker = page.Marker
	}
	full := func() bool { return page.MaxKeys > 0 && int64(len(entries)) > page.MaxKeys }
	visitEntry := func(o listedObject) bool {
		e := entry{name: o.key, obj: o}
		if delim != "" {
			if j := strings.Index(o.key[len(pfx):], delim); j >= 0 {
				e = entry{name: o.key[:len(pfx)+j+len(delim)], prefix: true}
			}
		}
		// The marker (continuation token or start-after) excludes keys up to
		// it, and the common prefix it names when it ended the last page.
		if page.HasMarker && (o.key <= page.Marker || e.prefix && e.name == page.Marker) {
			return true
		}
		if n := len(entries); n > 0 && entries[n-1].prefix && e.prefix && entries[n-1].name == e.name {
			return true
		}
		entries = append(entries, e)
		// One entry past the page proves that the listing is truncated.
		return !full()
	}
	// S3 lists what was there at one moment. A walk that a write of ours
	// overlapped (listGuard) is walked again, and so is one that found a
	// file deleted between its directory's read and its stat (errVanished):
	// dropping it would list a moment that never was, when a file created
	// before that delete (after the read) is not listed either. A lease
	// takeover (create generation n+1, then delete n) then listed no
	// generation at all, and a second taker started over at 0.
	for attempt := 1; ; attempt++ {
		exclusive := attempt > optimisticAttempts
		if exclusive {
			b.guard.mu.Lock()
		}
		entries = entries[:0]
		view := listView{g: &b.guard}
		read := func(dir string) ([]fs.DirEntry, error) {
			view.note(dir)
			if b.readDir != nil {
				return b.readDir(dir)
			}
			return os.ReadDir(dir)
		}
		err = walkKeys(read, start, rel, pfx, marker, visitEntry)
		moment := exclusive || view.unchanged()
		if exclusive {
			b.guard.mu.Unlock()
		}
		if moment && !errors.Is(err, errVanished) || attempt == maxListAttempts {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	out := gofakes3.NewObjectList()
	for i, e := range entries {
		if page.MaxKeys > 0 && int64(i) == page.MaxKeys {
			out.IsTruncated = true
			out.NextMarker = entries[i-1].name
			break
		}
		if e.prefix {
			out.AddPrefix(e.name)
		} else {
			out.Add(b.content(e.obj))
		}
	}
	return out, nil
}

// errVanished: a file listed by its directory's read was gone at its stat.
var errVanished = errors.New("a listed file vanished during the listing")

// maxListAttempts bounds the restarts of a listing whose files keep
// vanishing; the last one's error is the request's (500: clients retry).
const maxListAttempts = 100

// walkKeys calls visit, reading directories with read, for every regular, non-temp file under dir whose key
// (rel + its '/'-joined path below dir) has prefix pfx and is not excluded
// by marker, in byte order of the keys, until visit returns false.
// Subtrees whose keys all lie outside pfx or at or before marker are not
// read. A directory that does not exist (or vanishes meanwhile) holds no keys;
// a file that vanishes between its directory's read and its stat ends the
// walk with errVanished (the caller lists again).
//
// Byte order of keys is not the order of a plain recursive walk: the keys
// under directory "a" ("a/...") sort after a sibling file "a-b" ('-' <
// '/'), so siblings are ordered by name, with a directory's name compared
// as name+"/".
func walkKeys(read func(string) ([]fs.DirEntry, error), dir, rel, pfx, marker string, visit func(listedObject) bool) error {
	_, err := walkDirKeys(read, dir, rel, pfx, marker, visit)
	return err
}

func walkDirKeys(read func(string) ([]fs.DirEntry, error), dir, rel, pfx, marker string, visit func(listedObject) bool) (bool, error) {
	des, err := read(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return true, nil
		}
		return false, err
	}
	keyOf := func(de fs.DirEntry) string {
		if de.IsDir() {
			return rel + de.Name() + "/"
		}
		return rel + keyName(de.Name())
	}
	sort.SliceStable(des, func(i, j int) bool { return keyOf(des[i]) < keyOf(des[j]) })
	for _, de := range des {
		key := keyOf(de)
		if de.IsDir() {
			// key ends in "/": every key below starts with it.
			if !strings.HasPrefix(key, pfx) && !strings.HasPrefix(pfx, key) {
				continue
			}
			if marker != "" && key < marker && !strings.HasPrefix(marker, key) {
				continue // every key below sorts before the marker
			}
			more, err := walkDirKeys(read, filepath.Join(dir, de.Name()), key, pfx, marker, visit)
			if err != nil || !more {
				return more, err
			}
			continue
		}
		if isTemp(de.Name()) || !de.Type().IsRegular() || !strings.HasPrefix(key, pfx) {
			continue
		}
		if marker != "" && key <= marker {
			continue
		}
		st, err := de.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return false, errVanished // removed meanwhile: ListBucket lists again
		}
		if err != nil {
			continue
		}
		if !visit(listedObject{key, st}) {
			return false, nil
		}
	}
	return true, nil
}

func (b *dirBackend) content(o listedObject) *gofakes3.Content {
	return &gofakes3.Content{
		Key:          o.key,
		LastModified: gofakes3.NewContentTime(o.st.ModTime()),
		ETag:         gofakes3.FormatETag(etag(o.key, o.st)),
		Size:         o.st.Size(),
		StorageClass: "STANDARD",
	}
}

func (b *dirBackend) CreateBucket(name string) error {
	dir, err := b.bucketDir(name)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return gofakes3.ResourceError(gofakes3.ErrBucketAlreadyExists, name)
		}
		return err
	}
	return nil
}

func (b *dirBackend) DeleteBucket(name string) error {
	dir, err := b.bucketDir(name)
	if err != nil {
		return err
	}
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return gofakes3.BucketNotFound(name)
	}
	if err != nil {
		return err
	}
	if len(des) > 0 {
		return gofakes3.ResourceError(gofakes3.ErrBucketNotEmpty, name)
	}
	return os.Remove(dir)
}

func (b *dirBackend) ForceDeleteBucket(name string) error {
	dir, err := b.bucketDir(name)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return gofakes3.BucketNotFound(name)
	}
	return os.RemoveAll(dir)
}

// open opens the object's file. The bucket directory is looked at only when
// the file cannot be opened, to tell a missing bucket from a missing key: a
// file that opens proves its bucket exists, and every GET saves a stat(2).
func (b *dirBackend) open(bucket, key string) (*os.File, fs.FileInfo, error) {
	p, err := b.objectPath(bucket, key)
	if err != nil {
		if ok, berr := b.BucketExists(bucket); berr != nil || !ok {
			return nil, nil, gofakes3.BucketNotFound(bucket)
		}
		return nil, nil, err
	}
	f, err := b.openConfined(p)
	if errors.Is(err, errOutside) {
		return nil, nil, gofakes3.KeyNotFound(key) // the middleware already said 403
	}
	if err != nil {
		if ok, berr := b.BucketExists(bucket); berr != nil || !ok {
			return nil, nil, gofakes3.BucketNotFound(bucket)
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, nil, gofakes3.KeyNotFound(key)
		}
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, gofakes3.KeyNotFound(key)
	}
	return f, st, nil
}

// GetObject streams the object, or only the requested range: the file is
// seeked and wrapped in a LimitReader, never read whole into memory.
func (b *dirBackend) GetObject(bucket, key string, rr *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	f, st, err := b.open(bucket, key)
	if err != nil {
		return nil, err
	}
	rng, err := rr.Range(st.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	var body io.ReadCloser = f
	if rng != nil {
		if _, err := f.Seek(rng.Start, io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
		body = &limitedFile{r: io.LimitedReader{R: f, N: rng.Length}, f: f}
	}
	return &gofakes3.Object{
		Name:     key,
		Metadata: map[string]string{"Last-Modified": st.ModTime().UTC().Format(http.TimeFormat)},
		Size:     st.Size(),
		Contents: body,
		Hash:     etag(key, st),
		Range:    rng,
	}, nil
}

// limitedFile is the body of a ranged GET: the range of an open file.
type limitedFile struct {
	r io.LimitedReader // R is f
	f *os.File
}

func (l *limitedFile) Read(p []byte) (int, error) { return l.r.Read(p) }

// WriteTo hands the response writer an *io.LimitedReader over the *os.File,
// the form net/http and package net recognise for sendfile(2): the range
// goes from the page cache to the socket without a copy through user space
// (or the 32 KiB buffer io.Copy allocates per call for any other reader).
func (l *limitedFile) WriteTo(w io.Writer) (int64, error) { return io.Copy(w, &l.r) }

func (l *limitedFile) Close() error { return l.f.Close() }

func (b *dirBackend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	f, st, err := b.open(bucket, key)
	if err != nil {
		return nil, err
	}
	f.Close()
	return &gofakes3.Object{
		Name:     key,
		Metadata: map[string]string{"Last-Modified": st.ModTime().UTC().Format(http.TimeFormat)},
		Size:     st.Size(),
		Contents: io.NopCloser(strings.NewReader("")),
		Hash:     etag(key, st),
	}, nil
}

func (b *dirBackend) DeleteObject(bucket, key string) (gofakes3.ObjectDeleteResult, error) {
	if ok, err := b.BucketExists(bucket); err != nil || !ok {
		return gofakes3.ObjectDeleteResult{}, gofakes3.BucketNotFound(bucket)
	}
	p, err := b.objectPath(bucket, key)
	if err != nil {
		return gofakes3.ObjectDeleteResult{}, nil // S3 deletes of absent keys succeed
	}
	if out, err := outside(b.root, filepath.Dir(p)); out || err != nil {
		return gofakes3.ObjectDeleteResult{}, gofakes3.ErrorInvalidArgument("key", key, "the key resolves outside the served directory")
	}
	end := b.guard.write(filepath.Dir(p))
	err = os.Remove(p)
	end()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return gofakes3.ObjectDeleteResult{}, err
	}
	return gofakes3.ObjectDeleteResult{}, nil
}

// PutObject writes to a temp file in the destination folder, fsyncs and
// renames it, so a crash never leaves a partial object under the key.
// If-None-Match: * is honoured (put-if-absent) using a hard link, which
// fails if the key exists.
func (b *dirBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	if ok, err := b.BucketExists(bucket); err != nil || !ok {
		return gofakes3.PutObjectResult{}, gofakes3.BucketNotFound(bucket)
	}
	p, err := b.objectPath(bucket, key)
	if err != nil {
		return gofakes3.PutObjectResult{}, gofakes3.ErrorInvalidArgument("key", key, "invalid key")
	}
	if out, err := outside(b.root, p); out || err != nil {
		drain(input)
		return gofakes3.PutObjectResult{}, gofakes3.ErrorInvalidArgument("key", key, "the key resolves outside the served directory")
	}
	if cond != nil && cond.IfMatch != nil {
		f, st, err := b.open(bucket, key)
		info := &gofakes3.ConditionalObjectInfo{}
		if err == nil {
			f.Close()
			info.Exists, info.Hash = true, etag(key, st)
		}
		if err := gofakes3.CheckPutConditions(cond, info); err != nil {
			drain(input)
			return gofakes3.PutObjectResult{}, err
		}
	}
	// Published through durable: a temp file, fsync, then link(2) for
	// If-None-Match: * (put-if-absent, atomic against a racing PUT) or
	// rename otherwise, and a directory fsync. A reader never sees a
	// partial object.
	if err := b.ensureDir(bucket, filepath.Dir(p)); err != nil {
		return gofakes3.PutObjectResult{}, err
	}
	mode := durable.Replace
	if cond != nil && cond.IfNoneMatch != nil && *cond.IfNoneMatch == "*" {
		mode = durable.NoOverwrite
	}
	// The visible step (listGuard) starts once the body is in the temp
	// file, not while a client uploads it.
	end := func() {}
	_, err = durable.For(vfs.Default).Publish(filepath.Dir(p), filepath.Base(p), durable.Options{Mode: mode},
		func(w io.Writer) error {
			if _, err := io.Copy(w, input); err != nil {
				return err
			}
			end = b.guard.write(filepath.Dir(p))
			return nil
		})
	end()
	if errors.Is(err, durable.ErrExists) {
		drain(input)
		return gofakes3.PutObjectResult{}, gofakes3.ErrorMessage(gofakes3.ErrPreconditionFailed, "The object already exists")
	}
	if errors.Is(err, gofakes3.ErrBadDigest) {
		// gofakes3's reader found the body unlike its Content-MD5 at its
		// end: nothing was published, and the client is told why (400
		// BadDigest, which it retries), not an internal error.
		return gofakes3.PutObjectResult{}, gofakes3.ErrBadDigest
	}
	return gofakes3.PutObjectResult{}, err
}

// drain reads a refused PUT's body to its end before the 412 goes out. A
// taken name is refused before the body is read; net/http then closes the
// connection under a client still sending a large body, and the client sees
// "connection reset" instead of the 412 (a lost race read as an I/O error).
func drain(body io.Reader) {
	_, _ = io.Copy(io.Discard, body)
}

// ensureDir creates dir (the folder of a key) and its missing parents up to
// the bucket's folder. A directory created is a visible step for listGuard
// in its parent, so only a write that creates one guards the parents.
func (b *dirBackend) ensureDir(bucket, dir string) error {
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return nil
	}
	var parents []string
	bdir, _ := b.bucketDir(bucket)
	for d := dir; d != bdir && len(d) > len(bdir); d = filepath.Dir(d) {
		parents = append(parents, filepath.Dir(d))
	}
	end := b.guard.write(parents...)
	defer end()
	return durable.EnsureDir(vfs.Default, dir)
}

func (b *dirBackend) DeleteMulti(bucket string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	var res gofakes3.MultiDeleteResult
	for _, k := range keys {
		if _, err := b.DeleteObject(bucket, k); err != nil {
			res.Error = append(res.Error, gofakes3.ErrorResult{Key: k, Code: gofakes3.ErrInternal, Message: err.Error()})
			continue
		}
		res.Deleted = append(res.Deleted, gofakes3.ObjectID{Key: k})
	}
	return res, nil
}

func (b *dirBackend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	f, _, err := b.open(srcBucket, srcKey)
	if err != nil {
		return gofakes3.CopyObjectResult{}, err
	}
	defer f.Close()
	if _, err := b.PutObject(dstBucket, dstKey, meta, f, -1, nil); err != nil {
		return gofakes3.CopyObjectResult{}, err
	}
	p, _ := b.objectPath(dstBucket, dstKey)
	st, err := os.Stat(p)
	if err != nil {
		return gofakes3.CopyObjectResult{}, err
	}
	return gofakes3.CopyObjectResult{ETag: gofakes3.FormatETag(etag(dstKey, st)), LastModified: gofakes3.NewContentTime(st.ModTime())}, nil
}
