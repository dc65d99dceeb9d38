package pipeline

import (
	"testing"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/files"
)

// TestPluginConfKeys: the conf keys the engine checks for its plugins are
// the ones the plugins read (the file sink cannot import the engine).
func TestPluginConfKeys(t *testing.T) {
	if files.ConfCompactInterval != engine.ConfFileSinkCompactInterval {
		t.Errorf("sink/files reads %s, the engine checks %s", files.ConfCompactInterval, engine.ConfFileSinkCompactInterval)
	}
}
