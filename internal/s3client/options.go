package s3client

import (
	"net/url"
	"strconv"
)

// ConnOptions are the URI query keys that describe the connection, taken
// alike by every S3 location (the archive source, --checkpoint, --table).
var ConnOptions = []string{"endpoint", "region", "anonymous", "pathStyle"}

// SetOption applies the URI option key=value to c if key is one of
// ConnOptions: ok says whether it was; want, when not empty, says what the
// option takes (its value was malformed), for the caller's own error.
func (c *Conn) SetOption(key, value string) (ok bool, want string) {
	switch key {
	case "endpoint":
		u, err := url.Parse(value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return true, "an http:// or https:// URL"
		}
		c.Endpoint = value
	case "region":
		c.Region = value
	case "anonymous", "pathStyle":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return true, "true or false"
		}
		if key == "anonymous" {
			c.Anonymous = b
		} else {
			c.PathStyle, c.pathStyleSet = b, true
		}
	default:
		return false, ""
	}
	return true, ""
}

// ApplyDefaults completes options set by SetOption: a custom endpoint (an
// embedded or self-hosted server) implies path-style addressing unless
// pathStyle was given.
func (c *Conn) ApplyDefaults() {
	if c.Endpoint != "" && !c.pathStyleSet {
		c.PathStyle = true
	}
}
