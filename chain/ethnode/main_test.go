package ethnode

import (
	"fmt"
	"os"
	"testing"
)

var sharedTmp string

func TestMain(m *testing.M) {
	var err error
	sharedTmp, err = os.MkdirTemp("", "ethstream-chain-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(sharedTmp)
	os.Exit(code)
}

// tempDirForPackage is a directory shared by the tests of one binary,
// removed by TestMain.
func tempDirForPackage() (string, error) {
	return os.MkdirTemp(sharedTmp, "archive-")
}
