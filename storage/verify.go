package storage

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ethstream/ethstream/errcode"
)

// CodeStorageWriteLost: a store acknowledged a PUT it does not hold.
const CodeStorageWriteLost = errcode.StorageWriteLost

// Every PUT is verified twice (doc.go, "Verified writes"):
//
//   - on the way: it carries Content-MD5 and x-amz-checksum-crc32c of its
//     body, which the server checks before it stores anything (AWS S3,
//     Versity Gateway, and the embedded endpoint's gofakes3 for
//     Content-MD5); a body damaged in transit is refused (400 BadDigest),
//     which is retried like a 5xx;
//   - after it: a HEAD reads back the stored size (and the CRC32C where the
//     store keeps one), and a PUT's answered CRC32C is compared too. A
//     store that answered 200 but holds an empty, short or other object
//     fails the write with STORAGE_WRITE_LOST before the caller publishes
//     anything that refers to it (a Delta commit, a checkpoint entry).
//
// The lying object is then deleted: it was written by this PUT (a
// put-if-absent that lost its race never gets here), and leaving it would
// turn a failed batch into a damaged file at the next start.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// digest is what a PUT body's checksum headers carry.
type digest struct {
	md5    string // base64, for Content-MD5
	crc32c string // base64 of the big-endian CRC32C, for x-amz-checksum-crc32c
	size   int64
}

// digestOf reads r to its end once.
func digestOf(r io.Reader) (digest, error) {
	m := md5.New()
	c := crc32.New(castagnoli)
	n, err := io.Copy(io.MultiWriter(m, c), r)
	if err != nil {
		return digest{}, err
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], c.Sum32())
	return digest{md5: base64.StdEncoding.EncodeToString(m.Sum(nil)),
		crc32c: base64.StdEncoding.EncodeToString(b[:]), size: n}, nil
}

// verify reads back what the store holds under key after a PUT of d that it
// answered with out, and returns STORAGE_WRITE_LOST (having deleted the
// object) if it is not what was sent.
func (s *Objects) verify(ctx context.Context, key string, d digest, out *s3.PutObjectOutput) error {
	if out != nil && aws.ToString(out.ChecksumCRC32C) != "" && aws.ToString(out.ChecksumCRC32C) != d.crc32c {
		return s.lost(ctx, key, fmt.Sprintf("it answered CRC32C %s for a body of CRC32C %s", aws.ToString(out.ChecksumCRC32C), d.crc32c))
	}
	var head *s3.HeadObjectOutput
	err := s.do(ctx, "verify", key, false, func(rctx context.Context) error {
		var err error
		head, err = s.client.HeadObject(rctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key),
			ChecksumMode: types.ChecksumModeEnabled})
		return err
	})
	if errors.Is(err, os.ErrNotExist) {
		return s.lost(ctx, key, fmt.Sprintf("it holds no object there (%d bytes were written)", d.size))
	}
	if err != nil {
		return err
	}
	if got := aws.ToInt64(head.ContentLength); got != d.size {
		return s.lost(ctx, key, fmt.Sprintf("it holds %d bytes (%d were written)", got, d.size))
	}
	if c := aws.ToString(head.ChecksumCRC32C); c != "" && c != d.crc32c {
		return s.lost(ctx, key, fmt.Sprintf("it holds an object of CRC32C %s (%s was written)", c, d.crc32c))
	}
	return nil
}

// lost deletes the object a store acknowledged but does not hold as
// written, and returns the STORAGE_WRITE_LOST error saying so.
func (s *Objects) lost(ctx context.Context, key, what string) error {
	p := s.URI(key)
	msg := fmt.Sprintf("%s acknowledged the write of %s but %s; the object was removed", s.endpoint, p, what)
	if err := s.Delete(ctx, key); err != nil {
		msg = fmt.Sprintf("%s acknowledged the write of %s but %s; removing it failed too (%v)", s.endpoint, p, what, err)
	}
	return errcode.New(CodeStorageWriteLost, p,
		"check the store (or the proxy in front of it) for writes it acknowledges but does not keep, then start again: the batch is redone and nothing committed was lost",
		"%s", msg)
}
