package ethrpc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/logtest"
)

// TestHistoryLogCodec runs the one checkpoint.Log suite against the history
// files: keyed by the end offset, other names in MetadataDir ignored.
func TestHistoryLogCodec(t *testing.T) {
	hist := func(i int) *history {
		h := &history{}
		parent := fmt.Sprintf("0x%064x", 0)
		for n := 0; n <= i%4; n++ {
			num := 100 + i - i%4 + n
			hash := fmt.Sprintf("0x%064x", 1000+num)
			h.blocks = append(h.blocks, blockRow{Number: int64(num), Hash: hash, ParentHash: parent, BlockTS: int64(num) * 12,
				Miner: fmt.Sprintf("0x%040x", n), TransactionCount: int64(n), GasUsed: int64(n * 21000)})
			parent = hash
		}
		return h
	}
	logtest.Run(t, logtest.Case[Offset, *history]{
		Codec: historyCodec{},
		Key: func(i int) Offset {
			l := hist(i).last()
			return Offset{Block: uint64(l.Number), Hash: l.Hash}
		},
		Value: hist,
		Stray: "notes",
	})
	var _ checkpoint.Codec[Offset, *history] = historyCodec{}
}

// FuzzHistoryName: an accepted history file name is the name of its end
// offset (no second name for one file, so prune cannot miss one).
func FuzzHistoryName(f *testing.F) {
	for _, n := range []string{"history.5.0xab.json", "history.05.0xab.json", "history.5..json", "history.5.0xab.c.json", "history..json", "history.18446744073709551616.0x1.json"} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) { logtest.CheckName(t, historyCodec{}, name) })
}

// TestHistoryV1File reads a history file written by the version-1 code
// (checked in): its rows hold the seven columns, not Full, and a version-2
// history that carries them over keeps them as they were recorded.
func TestHistoryV1File(t *testing.T) {
	const name = "history.26086572.0x0000000000000000000000000000000000000000000000000000000000abc002.json"
	data, err := os.ReadFile(filepath.Join("testdata", "history-v1", name))
	if err != nil {
		t.Fatal(err)
	}
	o, ok := historyCodec{}.Key(name)
	if !ok {
		t.Fatal("name")
	}
	h, err := historyCodec{}.Decode(name, o, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.blocks) != 3 || h.blocks[0].Number != 26086570 || h.blocks[2].GasUsed != 14_002_000 ||
		h.blocks[1].BlockTS != 1790726423000000 || h.blocks[0].Miner != "0x95222290dd7278aa3ddd389cc1e1d165cc4bafe5" {
		t.Fatalf("%+v", h.blocks)
	}
	for _, r := range h.blocks {
		if r.Full {
			t.Fatalf("block %d of a version-1 file is Full", r.Number)
		}
	}
	// Extended by a full row, the history is version 2: the old rows keep
	// their seven fields, the new one has all.
	next := fullRow(26086573, h.last().Hash, true)
	h2 := h.extend([]blockRow{next}, 10)
	enc := h2.encode()
	if !strings.HasPrefix(string(enc), `{"version":2,`) || !strings.Contains(string(enc), string(data[len(`{"version":1,"blocks":[`):len(data)-3])) {
		t.Fatalf("version 2 does not carry the version-1 blocks as written:\n%s", enc)
	}
	got, err := parseHistory(enc, 10, nil)
	if err != nil || fmt.Sprint(got.blocks) != fmt.Sprint(h2.blocks) || !got.last().Full || got.blocks[0].Full {
		t.Fatalf("%v %v", got, err)
	}
	// publish keeps a version-1 file holding the same blocks (planned by an
	// older ethstream) rather than calling it corrupt.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	l := &historyLog{fs: vfs.Default, dir: dir}
	full := &history{}
	for _, r := range h.blocks {
		f := fullRow(r.Number, r.ParentHash, false)
		f.Hash, f.BlockTS, f.Miner, f.TransactionCount, f.GasUsed = r.Hash, r.BlockTS, r.Miner, r.TransactionCount, r.GasUsed
		full.blocks = append(full.blocks, f)
	}
	if err := l.publish(o, full); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, name)); string(after) != string(data) {
		t.Fatal("the version-1 file was rewritten")
	}
	full.blocks[1].GasUsed++
	if err := l.publish(o, full); !errcode.Is(err, errcode.CheckpointCorrupt) {
		t.Fatalf("a version-1 file of other blocks: %v", err)
	}
}

// fullRow is a Full block row; london and shanghai set the nullable
// columns.
func fullRow(num int64, parent string, post bool) blockRow {
	r := blockRow{Number: num, Hash: fmt.Sprintf("0x%064x", num*7919), ParentHash: parent, BlockTS: num * 12_000_000,
		Miner: fmt.Sprintf("0x%040x", num%5), TransactionCount: num % 300, GasUsed: num % 30_000_000,
		Full: true, Nonce: fmt.Sprintf("0x%016x", num), Sha3Uncles: "0x" + strings.Repeat("1d", 32),
		LogsBloom: "0x" + strings.Repeat("00", 255) + "08", TransactionsRoot: fmt.Sprintf("0x%064x", num+1),
		StateRoot: fmt.Sprintf("0x%064x", num+2), ReceiptsRoot: fmt.Sprintf("0x%064x", num+3),
		Difficulty: 1.2345678901234567e16, Size: 540 + num%1000, ExtraData: "0x", GasLimit: 30_000_000}
	if post {
		r.Difficulty = 0
		r.TotalDifficulty, r.HasTotalDifficulty = 5.875000371659835e22, true
		r.BaseFeePerGas, r.HasBaseFee = 7+num%1000, true
		r.WithdrawalsRoot, r.HasWithdrawalsRoot = fmt.Sprintf("0x%064x", num+4), true
		r.ExtraData = "0xd883010d0e846765746888676f312e32302e32856c696e7578"
	}
	return r
}

// TestHistoryV2: every column round-trips, nulls included; a block with
// some but not all columns beyond the seven, a null where the column is
// not nullable, or a version-1 file with them is refused.
func TestHistoryV2(t *testing.T) {
	h := &history{}
	parent := "0x" + strings.Repeat("ab", 32)
	for i := range 4 {
		r := fullRow(int64(100+i), parent, i >= 2)
		if i == 3 {
			r.HasTotalDifficulty, r.TotalDifficulty = false, 0 // a node that does not report it
		}
		h.blocks = append(h.blocks, r)
		parent = r.Hash
	}
	data := h.encode()
	end := Offset{Block: 103, Hash: h.last().Hash}
	got, err := parseHistory(data, 10, &end)
	if err != nil || fmt.Sprint(got.blocks) != fmt.Sprint(h.blocks) || string(got.encode()) != string(data) {
		t.Fatalf("%v %v\n%s", got, err, data)
	}
	for _, want := range []string{`"base_fee_per_gas":null`, `"withdrawals_root":null`, `"total_difficulty":null`, `"difficulty":1.2345678901234568e+16`, `"total_difficulty":5.875000371659835e+22`} {
		if !strings.Contains(string(data), want) {
			t.Fatalf("no %s in %s", want, data)
		}
	}
	for name, bad := range map[string]string{
		"partial":      strings.Replace(string(data), `,"gas_limit":30000000`, ``, 1),
		"null nonce":   strings.Replace(string(data), `"nonce":"0x0000000000000064"`, `"nonce":null`, 1),
		"short bloom":  strings.Replace(string(data), `"logs_bloom":"0x`+strings.Repeat("00", 255)+`08"`, `"logs_bloom":"0x08"`, 1),
		"upper hex":    strings.Replace(string(data), `"sha3_uncles":"0x`+strings.Repeat("1d", 32), `"sha3_uncles":"0x`+strings.Repeat("1D", 32), 1),
		"odd extra":    strings.Replace(string(data), `"extra_data":"0x"`, `"extra_data":"0x1"`, 1),
		"negative fee": strings.Replace(string(data), `"base_fee_per_gas":109`, `"base_fee_per_gas":-109`, 1),
		"v1 with ext":  strings.Replace(string(data), `"version":2`, `"version":1`, 1),
		"fee string":   strings.Replace(string(data), `"base_fee_per_gas":109`, `"base_fee_per_gas":"109"`, 1),
	} {
		if bad == string(data) {
			t.Fatalf("%s: replacement did not apply", name)
		}
		if _, err := parseHistory([]byte(bad), 10, &end); err == nil {
			t.Errorf("%s: accepted %s", name, bad)
		}
	}
}
