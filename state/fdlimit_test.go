package state

import (
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
)

func TestCheckPartitionsAgainstFileLimit(t *testing.T) {
	defer func(l func() (uint64, uint64, bool), r func(uint64) bool) { fileLimit, raiseFileLimit = l, r }(fileLimit, raiseFileLimit)
	var soft, hard uint64
	raised := false
	fileLimit = func() (uint64, uint64, bool) { return soft, hard, true }
	raiseFileLimit = func(n uint64) bool {
		if n > hard {
			return false
		}
		raised, soft = true, hard
		return true
	}
	cases := []struct {
		soft, hard uint64
		from, to   int
		code       string
		raised     bool
		remedy     string
	}{
		{soft: 20000, hard: 20000, to: 200},
		{soft: 20000, hard: 20000, to: 2193},
		{soft: 20000, hard: 20000, to: 2194, code: CodeOpenFileLimit, remedy: "use at most 2193 partitions"},
		{soft: 20000, hard: 20000, to: 10000, code: CodeOpenFileLimit, remedy: "ulimit -n 90256"},
		// A repartition holds both generations.
		{soft: 20000, hard: 20000, from: 200, to: 1993},
		{soft: 20000, hard: 20000, from: 200, to: 1994, code: CodeOpenFileLimit, remedy: "use at most 1993 partitions"},
		// The soft limit is raised to the hard one when that is enough.
		{soft: 1024, hard: 4096, to: 200, raised: true},
		{soft: 1024, hard: 1024, to: 200, code: CodeOpenFileLimit, remedy: "use at most 85 partitions"},
		{soft: 100, hard: 100, to: 1, code: CodeOpenFileLimit, remedy: "use fewer partitions"},
		{soft: 1 << 40, hard: 1 << 40, to: 10001, code: errcode.InvalidArgument},
		{soft: 1 << 40, hard: 1 << 40, to: 0, code: errcode.InvalidArgument},
	}
	for _, c := range cases {
		soft, hard, raised = c.soft, c.hard, false
		err := CheckPartitions(c.from, c.to)
		if errcode.Code(err) != c.code || (c.remedy != "" && !strings.Contains(err.Error(), c.remedy)) {
			t.Errorf("%+v: err = %v", c, err)
		}
		if raised != c.raised {
			t.Errorf("%+v: raised = %v", c, raised)
		}
	}
}
