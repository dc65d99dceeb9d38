// Package storage says where a query's files live and gives the vfs.FS that
// reaches them: the local disk, or S3 for the checkpoint and the Delta table
// (any mix). The state's Pebble instances stay on the local disk as a cache
// (--local-dir); everything needed to resume lives in the checkpoint, so a
// query resumes on any machine from S3 alone.
//
// # Locations
//
// --checkpoint and --table take
//
//	path/to/dir | /abs/dir          the local disk
//	file:///abs/dir                 the local disk
//	s3://BUCKET/PREFIX?OPTIONS      S3 (AWS or any S3-compatible endpoint)
//
// with the s3archive source's options: endpoint=URL (a custom endpoint;
// implies pathStyle=true), region=R (default: the environment's, else
// us-east-1), anonymous=BOOL (unsigned requests; otherwise the default AWS
// credential chain: environment, shared config and credentials files, SSO,
// web identity, container and instance roles), pathStyle=BOOL, and
// leaseTTL=DUR (the checkpoint lease, default 30s, at least 1s). Every
// other path flag (--local-dir, --progress, --workdir, --results, --out,
// ...) is on the local disk only. A value with any other scheme (gs://,
// abfss://, hdfs://, a typo such as s4://), or s3:// where only a local
// path fits, is UNSUPPORTED_LOCATION, refused before anything is written.
// Parse and CheckLocal do no I/O; NewFS sends no request.
//
// # Objects
//
// An S3 path is s3://bucket/key. A "directory" is a key prefix: it exists
// while an object lives under it, MkdirAll writes nothing, and a directory
// fsync is a no-op (an object is durable when its PUT returns). The files
// are the local layout's, byte for byte, under the location's prefix: a
// checkpoint or table copied between the local disk and S3 (aws s3 sync)
// reads the same.
//
// Publishing (durable.Publisher) needs no temp object, since an S3 PUT is
// atomic: durable.NoOverwrite is a PUT with "If-None-Match: *", so of two
// writers of one name exactly one gets 200 and the other 412 Precondition
// Failed, reported as durable.ErrExists like link(2)'s EEXIST; this guards
// every file that is written once (metadata, offsets and commits entries,
// source logs, state versions, Delta commits and data files). A 409
// ConditionalRequestConflict (a conditional write of the same key in
// flight) is retried until it resolves to 200 or 412 (or the retry budget
// is spent). A put-if-absent that
// gets no answer at all (a server may refuse a taken name before reading the
// body and close the connection under it) is resolved by a HEAD: if the key
// exists the put counts as a lost race, even if it was in fact this PUT that
// landed, so two writers never both believe they won (the loser's path is
// safe: it stops or leaves an orphan for vacuum). durable.Replace is a
// plain PUT (Delta checkpoints, _last_checkpoint). The server must honour
// If-None-Match on PUT (AWS S3 since 2024, Versity Gateway, MinIO, the
// embedded endpoint of package storage/s3serve). An object is staged before its one
// PUT (a PUT needs its length): in memory up to 4 MiB, beyond that in a
// local temp file (under the state cache, --local-dir, else the system
// temp directory), unlinked as soon as it is open, so a crash leaves
// nothing and memory stays bounded whatever the object's size. Multipart
// upload is not used: put-if-absent stays one conditional PUT, and the
// embedded endpoint has no multipart API (Versity Gateway v1.8.0 does honour
// If-None-Match on CompleteMultipartUpload). Reads are GETs: an object up to
// 8 MiB is read whole, a larger one by ranged GETs. Ranged GETs (these, and
// the archive source's column chunks) go out beside the SDK's operation
// stack (rangeget.go), with the SDK's own endpoint, escaping, signature,
// HTTP client and error parsing, at half its CPU a request. On the wire
// such a GET is a plain HTTP/1.1 exchange on a kept-alive connection of the
// getter's own (rangeconn.go: the request line and headers net/http would
// send, the answer's status line and headers read up to 10 MiB, a body of
// Content-Length bytes); a proxy, a client setting the SDK's timeouts or
// no keep-alive, and an answer chunked, without a length, 1xx or a 307/308
// go through net/http instead. List is ListObjectsV2
// with delimiter "/"; ListInfo gives each entry's size and time from those
// same responses (one request per page of up to 1,000 keys, no HEAD per
// object: vacuum and the temp-file sweep use it), while Stat of one name
// is a HEAD. An append rewrites the object; the only appended files are
// the segments of the checkpoint's informational progress log, at most
// 256 KiB each (package checkpoint, "progress/"), so an append costs one
// segment, not the whole history.
//
// # The range client against net/http
//
// The ranged GETs' own connections (rangeconn.go) follow the SDK client's
// http.Transport where it applies to them: its dialer (the 30 s connect
// timeout), TLS settings and TLSHandshakeTimeout (a stuck handshake fails
// with net/http's "net/http: TLS handshake timeout", a transient error),
// MaxConnsPerHost (a GET beyond it waits for a connection), the idle count
// (MaxIdleConnsPerHost, MaxIdleConns) and IdleConnTimeout (an idle
// connection past it on the wall clock, as net/http counts, is closed when
// the next GET looks, not by a timer: a pool no GET touches stays open
// until then). They differ in what they
// speak and read: HTTP/1.1 only, ALPN "http/1.1" alone (a server that
// prefers h2 answers in HTTP/1.1; one that offers h2 alone, which S3
// does not, answers HTTP/1.1 all the same, as Go's servers do, or refuses
// the handshake); no proxy, no client or read
// timeout, no keep-alive off, no TLS dialler of the client's own (such a
// client's GETs all go through net/http); bodies of a Content-Length only
// (a chunked answer, one without a length, a 1xx and a 307/308 go again
// through net/http, and after 4 such 2xx answers in a row the endpoint's
// GETs go to net/http alone); no httptrace hooks, no gzip, no Expect:
// 100-continue (a GET has no body). The two pools are counted apart, so
// MaxConnsPerHost bounds each of them, not their sum. A TCP connection's
// reads and writes, under TLS too, are raw system calls
// (storage/internal/rawsock), with net.Conn's errors and deadlines.
//
// # Verified writes
//
// A PUT counts only once the store is seen to hold it (verify.go). Each
// carries Content-MD5 and x-amz-checksum-crc32c of its body, which the
// server checks before storing anything (AWS S3 and Versity Gateway both;
// the embedded endpoint, gofakes3, checks Content-MD5): a body damaged on
// the way is refused with 400 BadDigest and sent again like a 5xx. After
// the 200, a HEAD reads the stored size back (and the stored CRC32C, where
// the store keeps one; a CRC32C in the PUT's answer is compared too). A
// store that acknowledged a write it does not hold (an empty or short
// object, another checksum, no object) fails the write with
// STORAGE_WRITE_LOST naming the object and both sizes, and the object is
// deleted. The writer publishes nothing that refers to an object before
// its write returned (a data file before its Delta commit, a state file
// before the commit entry), so the batch fails before its commit and is
// redone at the next start: a committed batch is never lost. The check
// costs one HEAD per PUT. A replacing PUT (durable.Replace) raced by
// another writer of the same key can fail the check although both writes
// landed; that fails safe (the batch is redone), and the replaced files
// (Delta checkpoints, _last_checkpoint, the lease) have one writer each.
//
// Reads verify by length: an answer shorter than its Content-Length (a
// truncated body, a reset mid-body) is retried; a large object's streamed
// body resumes with a ranged GET from the byte where it broke off, and a
// body that breaks off again before a byte arrives counts against the
// retry budget.
//
// # Requests, retries and errors
//
// Every S3 request of ethstream, the archive source's included, goes
// through Objects: one client per bucket (s3client: a pool of 64 idle
// connections per host, no SDK retryer, no SDK logging, and no EC2
// instance-metadata lookup when endpoint= names a server), one
// classification of failures (Classify), and one retry policy (Retry:
// transient failures, that is 5xx, 503 SlowDown and 429, timeouts, resets
// and refused connections, and a 409 of a conditional write in flight, are
// retried up to 10 times with full-jitter exponential backoff from 25 ms
// to 5 s, on an injected clock). A failure is then os.ErrNotExist (404),
// durable.ErrExists (412 of a put-if-absent), STORAGE_CREDENTIALS (no
// credentials found, or refused: InvalidAccessKeyId,
// SignatureDoesNotMatch, an expired token, AccessDenied on a read),
// READ_ONLY_STORAGE (AccessDenied on a write), STORAGE_UNAVAILABLE (the
// retry budget spent: names the endpoint, the object and the last error),
// or an error naming the operation, the object and the server's reason.
// A start (pipeline.Run) first probes each S3 endpoint once (Mux.Probe:
// one LIST of at most one key per endpoint, the endpoints in parallel,
// within ProbeBudget, 30 s), so a dead endpoint costs one retry budget, not
// one per check of the start.
// A vfs call carries no context: the FS's requests use NewFS's context
// without its cancellation (a stopping command still completes the publish
// or lease release under way), each attempt bounded by
// DefaultRequestTimeout.
//
// # Lease protocol (the checkpoint lock on S3), format 1
//
// The local checkpoint lock is flock(2) on <checkpoint>/.lock. On S3 the
// lock is a lease: objects <checkpoint>/.lock/<generation:%020d>, each
// holding one JSON object
//
//	{"version":1,"owner":"<host>:<pid>:<start ns>","expiresMs":<unix ms>,"ttlMs":<ms>,"released":false}
//
// The highest generation alone decides who holds the checkpoint.
//
//   - Acquire: list .lock/; if the highest generation G is neither released
//     nor expired (expiresMs > now), the start fails with CHECKPOINT_LOCKED
//     naming its owner and expiry. Otherwise PUT generation G+1 with
//     If-None-Match: * and expiresMs = now + TTL: 200 = held; 412 = another
//     query took it first, CHECKPOINT_LOCKED. The holder then deletes the
//     generations below G, keeping G: a generation number must never be
//     taken twice, and a taker whose listing ran while G+1 was created and
//     G deleted could see neither (a LIST is no snapshot across keys), start
//     over at generation 0, and win it. With G kept, such a listing still
//     shows G (only the taker of G+2 deletes it), so it PUTs G+1 and gets
//     412.
//   - Renew: every TTL/3 the holder checks that G+1 does not exist and
//     rewrites its own generation (a plain PUT: no one else writes it) with
//     a new expiry. If G+1 exists the lease was taken over: lost.
//   - Fence: the holder refuses every write under the checkpoint (with
//     CHECKPOINT_LOCKED) once its lease is lost or past its last expiry
//     without a renewal, so a paused or partitioned query stops writing
//     before anyone may take over.
//   - Release: a clean stop rewrites its generation with released: true,
//     so the next start need not wait.
//   - Crash: a killed holder stops renewing; its lease expires TTL after
//     the last renewal and the next start takes generation G+1.
//
// Expiry compares the holder's and the taker's wall clocks, so they must
// agree to well within TTL (NTP). The lease only keeps a second query out
// early: correctness does not rest on it, because every offsets and commits
// entry is put-if-absent, so two writers can never both commit a batch.
package storage
