package s3client

import "testing"

// TestSetOption: the connection options parse into Conn, malformed values
// say what they take, other keys are left to the caller, and an endpoint
// implies path-style addressing unless pathStyle was given (in any order).
func TestSetOption(t *testing.T) {
	for _, c := range []struct {
		opts [][2]string
		want Conn
	}{
		{nil, Conn{}},
		{[][2]string{{"endpoint", "http://127.0.0.1:9000"}}, Conn{Endpoint: "http://127.0.0.1:9000", PathStyle: true}},
		{[][2]string{{"pathStyle", "false"}, {"endpoint", "https://s3.example"}}, Conn{Endpoint: "https://s3.example"}},
		{[][2]string{{"region", "us-east-2"}, {"anonymous", "true"}}, Conn{Region: "us-east-2", Anonymous: true}},
		{[][2]string{{"pathStyle", "true"}}, Conn{PathStyle: true}},
	} {
		var got Conn
		for _, kv := range c.opts {
			if ok, want := got.SetOption(kv[0], kv[1]); !ok || want != "" {
				t.Fatalf("%v: SetOption(%s=%s) = %v, %q", c.opts, kv[0], kv[1], ok, want)
			}
		}
		got.ApplyDefaults()
		got.pathStyleSet = false
		if got != c.want {
			t.Errorf("%v: %+v, want %+v", c.opts, got, c.want)
		}
	}
	for _, kv := range [][3]string{
		{"endpoint", "127.0.0.1:9000", "an http:// or https:// URL"},
		{"endpoint", "ftp://host", "an http:// or https:// URL"},
		{"anonymous", "yes", "true or false"},
		{"pathStyle", "", "true or false"},
	} {
		var c Conn
		if ok, want := c.SetOption(kv[0], kv[1]); !ok || want != kv[2] {
			t.Errorf("SetOption(%s=%q) = %v, %q; want true, %q", kv[0], kv[1], ok, want, kv[2])
		}
	}
	var c Conn
	if ok, _ := c.SetOption("maxFilesPerTrigger", "5"); ok {
		t.Error("a source option was taken as a connection option")
	}
}
