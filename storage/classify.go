package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go"

	"github.com/ethstream/ethstream/internal/s3client"
)

// Class is what an object-store failure means to its caller. Every S3
// request of ethstream (the archive source, the checkpoint, the table) is
// judged by Classify alone, so a 503 is retried, and a 403 is named, the
// same way everywhere.
type Class uint8

const (
	// ClassOther is a failure retrying cannot fix and no other class
	// names (a missing bucket, a malformed request).
	ClassOther Class = iota
	// ClassNotFound: no such object (404, NoSuchKey).
	ClassNotFound
	// ClassPrecondition: a conditional request's condition failed (412: a
	// put-if-absent of a taken name).
	ClassPrecondition
	// ClassCredentials: no credentials could be found to sign the request,
	// or the server refused them (an unknown key, a bad signature, an
	// expired token).
	ClassCredentials
	// ClassAccessDenied: the credentials are valid but not allowed the
	// operation (403 AccessDenied); on a write, the store is read-only to
	// this user.
	ClassAccessDenied
	// ClassTransient: a 5xx, a timeout, a reset or refused connection, a
	// truncated body, a body refused for its checksum (400 BadDigest), or
	// a conditional write in flight (409): the same
	// request may succeed later.
	ClassTransient
	// ClassThrottled: the server asked to slow down (503 SlowDown, 429);
	// transient too, and counted apart.
	ClassThrottled
)

var classNames = [...]string{"other", "not found", "precondition failed", "credentials", "access denied", "transient", "throttled"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Retryable reports whether a request that failed so may be sent again.
func (c Class) Retryable() bool { return c == ClassTransient || c == ClassThrottled }

// Classify says what err, returned by an S3 request (or by reading its
// body), means. A cancelled or expired caller context is ClassOther: the
// caller stopped, nothing is to be retried.
func Classify(err error) Class {
	if err == nil {
		return ClassOther
	}
	var se *v4.SigningError
	var ce *s3client.CredentialsError
	if errors.As(err, &se) || errors.As(err, &ce) {
		return ClassCredentials
	}
	if errors.Is(err, context.Canceled) {
		return ClassOther
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if c, ok := classOfCode(ae.ErrorCode()); ok {
			return c
		}
	}
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) && hs.HTTPStatusCode() > 0 {
		return classOfStatus(hs.HTTPStatusCode())
	}
	// No HTTP answer: a connection refused or reset, a timeout, a
	// truncated body.
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "connection refused") {
		return ClassTransient
	}
	return ClassOther
}

// classOfCode maps the S3 error codes whose meaning does not follow from
// their HTTP status alone.
func classOfCode(code string) (Class, bool) {
	switch code {
	case "NoSuchKey", "NotFound":
		return ClassNotFound, true
	case "PreconditionFailed":
		return ClassPrecondition, true
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "TokenRefreshRequired", "AuthorizationHeaderMalformed":
		return ClassCredentials, true
	case "AccessDenied", "AllAccessDisabled":
		return ClassAccessDenied, true
	case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests", "RequestThrottled":
		return ClassThrottled, true
	case "InternalError", "ServiceUnavailable", "RequestTimeout", "ConditionalRequestConflict", "OperationAborted",
		// The body did not arrive as sent (its Content-MD5 or checksum
		// header disagrees): nothing was stored, and sending it again may
		// succeed.
		"BadDigest", "XAmzContentChecksumMismatch", "XAmzContentSHA256Mismatch":
		return ClassTransient, true
	}
	return 0, false
}

func classOfStatus(st int) Class {
	switch {
	case st == 404:
		return ClassNotFound
	case st == 412:
		return ClassPrecondition
	case st == 401:
		return ClassCredentials
	case st == 403:
		return ClassAccessDenied
	case st == 429 || st == 503:
		return ClassThrottled
	case st == 409 || st == 408 || st >= 500:
		return ClassTransient
	}
	return ClassOther
}

// Reason says in a few words why an S3 request failed: the service's error
// code and message, or the transport's last word ("connection refused"),
// without the SDK's operation, request-id or credential-chain wrapping.
func Reason(err error) string {
	var se *v4.SigningError
	var ce *s3client.CredentialsError
	if errors.As(err, &se) || errors.As(err, &ce) {
		return "no credentials found"
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		msg := ae.ErrorCode()
		if st := httpStatus(err); st != 0 {
			msg = fmt.Sprintf("%s (HTTP %d)", msg, st)
		}
		if m := ae.ErrorMessage(); m != "" {
			msg += ": " + m
		}
		return msg
	}
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) && hs.HTTPStatusCode() > 0 {
		return fmt.Sprintf("HTTP status %d", hs.HTTPStatusCode())
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		msg := oe.Err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		return "endpoint does not answer (" + msg + ")"
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return "unknown host " + de.Name
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within the request timeout"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "endpoint does not answer (the connection closed without a complete answer)"
	}
	// Below the SDK's operation and response wrapping is the transport's
	// own error.
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	var op *smithy.OperationError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// httpStatus returns the HTTP status of an S3 error, 0 if none.
func httpStatus(err error) int {
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		return hs.HTTPStatusCode()
	}
	return 0
}
