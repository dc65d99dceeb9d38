package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/storage/s3serve"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func init() {
	rootCmd.AddCommand(genArchiveCmd(), serveS3Cmd(), nodeCmd())
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

func genArchiveCmd() *cobra.Command {
	var (
		out, preset, from, tables string
		seed                      int64
		days                      int
	)
	cmd := &cobra.Command{
		Use:   "gen-archive --out DIR [--preset demo|seed] [--days N [--from YYYY-MM-DD]] [--seed N]",
		Short: "Write a synthetic mainnet block archive in the AWS public-blockchain Parquet layout",
		Long: `gen-archive writes DIR/v1.0/eth/blocks/date=YYYY-MM-DD/part-00000-<uuid>-c000.snappy.parquet,
one file per day, and DIR/manifest.json (block range, last hash, files); with --tables also
DIR/v1.0/eth/{transactions,logs,token_transfers}/date=YYYY-MM-DD/..., one file per day each. Same seed and
preset give identical bytes. Presets: demo (the last 60 days, ending at block 26,086,569)
and seed (all 4,080 days, blocks 1..26,086,569). --days N writes the last N days instead.`,
		Example: `  ethstream gen-archive --out work/archive                  # the demo preset: 60 days
  ethstream gen-archive --out work/archive --days 3 --from 2021-08-05
  ethstream gen-archive --out work/tx --days 1 --from 2016-07-01 --tables all
  eval "$(ethstream archive info work/archive --env)"       # LAST_BLOCK, LAST_HASH for the live source`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errcode.New(errcode.InvalidArgument, "", "pass --out DIR", "--out is required")
			}
			p, err := archivePreset(preset, days, cmd.Flags().Changed("days"), from)
			if err != nil {
				return err
			}
			more, err := archivegen.ParseTables(tables)
			if err != nil {
				return err
			}
			start := time.Now()
			opts := archivegen.Options{Out: out, Preset: p, Seed: seed, Progress: genProgress(cmd, p), Tables: more}
			m, err := archivegen.Generate(cmd.Context(), opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: preset %s seed %d, %d files, %d rows (blocks %d..%d), %.1f MB in %s\nlast block %d hash %s\n",
				out, m.Preset, m.Seed, len(m.Files), m.Rows, m.FirstBlock, m.LastBlock, float64(m.Bytes)/1e6,
				time.Since(start).Round(time.Millisecond), m.LastBlock, m.LastHash)
			for _, t := range more {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d rows, %.1f MB\n", t, m.Tables[t].Rows, float64(m.Tables[t].Bytes)/1e6)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "archive root directory (created if missing)")
	cmd.Flags().StringVar(&preset, "preset", "demo", "demo or seed")
	cmd.Flags().Int64Var(&seed, "seed", chain.DefaultSeed, "chain seed")
	cmd.Flags().IntVar(&days, "days", 0, "reduced scale: write only the last N days")
	cmd.Flags().StringVar(&from, "from", "", "with --days: write N days from this date (YYYY-MM-DD) instead of the last N")
	cmd.Flags().StringVar(&tables, "tables", "blocks", "tables to write: blocks, or a list of transactions,logs,token_transfers, or all (their bodies cost ~20 µs a transaction)")
	return cmd
}

// archivePreset is the preset gen-archive writes: the named one, or with
// --days (daysSet) or --from the last N days, or N days from a date.
func archivePreset(name string, days int, daysSet bool, from string) (chain.Preset, error) {
	p, err := chain.PresetByName(name)
	if err != nil || (!daysSet && from == "") {
		return p, err
	}
	if !daysSet {
		days = 1
	}
	if days < 1 || days > chain.TotalDays {
		return p, errcode.New(errcode.InvalidArgument, "", fmt.Sprintf("pass --days between 1 and %d", chain.TotalDays), "invalid --days %d", days)
	}
	if from == "" {
		return chain.LastDaysPreset(days), nil
	}
	fd, err := time.Parse(time.DateOnly, from)
	last := chain.FirstDay.AddDate(0, 0, chain.TotalDays-days)
	if err != nil || fd.Before(chain.FirstDay) || fd.After(last) {
		return p, errcode.New(errcode.InvalidArgument, "", fmt.Sprintf("pass --from YYYY-MM-DD between %s and %s for %d days",
			chain.FirstDay.Format(time.DateOnly), last.Format(time.DateOnly), days), "invalid --from %q", from)
	}
	return chain.RangePreset(fd, days), nil
}

// genProgress reports gen-archive's files written: a bar on a terminal,
// else a log line every 5 s and at the end.
func genProgress(cmd *cobra.Command, p chain.Preset) func(done, total int) {
	if isTerminal(os.Stderr) {
		bar := progressbar.NewOptions(p.Days,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("gen-archive "+p.Name),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("files"),
			progressbar.OptionShowIts(),
			progressbar.OptionClearOnFinish())
		return func(done, _ int) { _ = bar.Set(done) }
	}
	last, logger := time.Now(), newLogger(cmd)
	return func(done, total int) {
		if done == total || time.Since(last) > 5*time.Second {
			last = time.Now()
			logger.Info("gen-archive", "files", done, "total", total)
		}
	}
}

// secretKeyEnv holds serve-s3's secret key: never a flag, which every
// user of the machine could read in ps.
const secretKeyEnv = "ETHSTREAM_S3_SECRET_KEY"

func serveS3Cmd() *cobra.Command {
	var (
		root, addr, accessKey string
		faults                s3serve.Faults
	)
	cmd := &cobra.Command{
		Use:   "serve-s3 --root DIR [--addr 127.0.0.1:9000] [--listen-public] [--access-key KEY]",
		Short: "Serve a directory as an S3-compatible endpoint (bucket = each top-level folder)",
		Long: `serve-s3 serves DIR over the S3 REST API (path-style, ListObjectsV2 with prefixes and
pagination, ranged GETs, PUT) until interrupted. Each top-level folder of DIR is a bucket,
so 'gen-archive --out DIR/archive' is readable as s3://archive/v1.0/eth/blocks. Only regular
files inside DIR are served (a symbolic link that leaves it is refused). A top-level folder whose
name is not a bucket name (3 to 63 lowercase letters, digits and hyphens) is not served: the
endpoint names such folders when it starts. Without --access-key
it serves whoever reaches it, and says so; with --access-key KEY and the secret in
` + secretKeyEnv + ` it requires AWS Signature V4 requests by that key.`,
		Example: `  ethstream gen-archive --out work/s3/aws-public-blockchain
  ethstream serve-s3 --root work/s3 &   # s3://aws-public-blockchain/v1.0/eth/blocks?endpoint=http://127.0.0.1:9000&anonymous=true`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if root == "" {
				return errcode.New(errcode.InvalidArgument, "", "pass --root DIR", "--root is required")
			}
			secret := os.Getenv(secretKeyEnv)
			if (accessKey == "") != (secret == "") {
				return errcode.New(errcode.InvalidArgument, "", "pass --access-key KEY and set "+secretKeyEnv+" to its secret, or neither for an unauthenticated endpoint",
					"serve-s3 needs both --access-key and %s, or neither", secretKeyEnv)
			}
			srv, err := s3serve.Start(cmd.Context(), s3serve.Options{Root: root, Addr: addr, Faults: faults, AccessKey: accessKey, SecretKey: secret})
			if err != nil {
				return err
			}
			auth := "unauthenticated: anyone who reaches it reads and writes; pass --access-key to require signed requests"
			if srv.Authenticated() {
				auth = "requests must be signed (SigV4) with access key " + accessKey
			}
			fmt.Fprintf(cmd.OutOrStdout(), "serving %s at %s (%s; Ctrl-C to stop)\n", root, srv.URL(), auth)
			if skip, err := s3serve.UnservedFolders(root); err == nil && len(skip) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "not served (not bucket names: %s): %s\n", s3serve.BucketNameRule, strings.Join(skip, ", "))
			}
			<-cmd.Context().Done()
			return srv.Close()
		},
	}
	cmd.Flags().StringVar(&root, "root", "", "directory to serve")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:9000", "listen address; beyond loopback only with --listen-public")
	registerListenPublic(cmd)
	cmd.Flags().StringVar(&accessKey, "access-key", "", "require AWS SigV4 requests signed with this access key (its secret in "+secretKeyEnv+")")
	cmd.Flags().Float64Var(&faults.ThrottleRate, "throttle-rate", 0, "fault injection: fraction of requests answered 503 SlowDown")
	cmd.Flags().Float64Var(&faults.ErrorRate, "error-rate", 0, "fault injection: fraction of requests answered 500 InternalError")
	cmd.Flags().Int64Var(&faults.Seed, "fault-seed", 1, "fault injection seed")
	return cmd
}
func nodeCmd() *cobra.Command {
	var (
		archive, addr string
		interval      time.Duration
		speed         float64
		initial       int
		seed          int64
		faults        ethnode.Faults
		reorgs        = nodeReorgs{depth: 8}
		reorgSeed     int64
	)
	cmd := &cobra.Command{
		Use:   "node --archive DIR [--addr 127.0.0.1:8545] [--listen-public] [--block-interval 12s] [--speed X] [--initial-blocks N] [--reorg-rate R [--reorg-depth N] [--reorg-seed N]]",
		Short: "Serve an Ethereum JSON-RPC chain continuing the archive's last block",
		Long: `node serves eth_blockNumber, eth_getBlockByNumber, eth_getBlockByHash, eth_chainId,
net_version and JSON-RPC batches over HTTP (and websocket) on loopback. The first block is
the archive's last block + 1, its parent hash the archive's last hash. A new block is
mined every --block-interval / --speed of wall time; block timestamps stay 12 s apart.
The head at start is the archive's last block + --initial-blocks.

With --reorg-rate R the chain reorganises: before answering a request for the head block
the node replaces its last 1..--reorg-depth blocks (same heights, other hashes) with
probability R, drawn from --reorg-seed in request order, and prints one line per
reorganisation. A query polling the head at confirmations=0 then meets reorganisations of
blocks it has read, as the demo's live_reorgs phase does (README, phase 6).`,
		Example: `  ethstream node --archive work/s3/aws-public-blockchain --initial-blocks 1000 &
  ethstream node --archive work/s3/aws-public-blockchain --initial-blocks 1000 --speed 60 --reorg-rate 0.2 --reorg-depth 8 &
  ethstream node --archive work/archive --speed 24 --addr 127.0.0.1:0   # a block every 0.5 s, a free port`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if archive == "" {
				return errcode.New(errcode.InvalidArgument, "", "pass --archive DIR (the --out of gen-archive)", "--archive is required")
			}
			if err := reorgs.validate(); err != nil {
				return err
			}
			if speed <= 0 || interval <= 0 {
				return errcode.New(errcode.InvalidArgument, "", "pass a positive --speed and --block-interval", "invalid speed %v or block interval %v", speed, interval)
			}
			m, err := archivegen.ReadManifest(archive)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("seed") {
				seed = m.Seed
			}
			n, err := ethnode.Start(cmd.Context(), ethnode.Options{
				Manifest: m, Seed: seed, Addr: addr, BlockInterval: interval, Speed: speed, InitialBlocks: initial,
				Faults: faults,
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node at %s: continuing block %d (parent %s), head %d, a block every %s (Ctrl-C to stop)\n",
				n.URL(), m.LastBlock+1, m.LastHash, n.Head(), time.Duration(float64(interval)/speed))
			if reorgs.rate > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "reorganising 1-%d blocks at %.0f%% of head requests (seed %d)\n", reorgs.depth, reorgs.rate*100, reorgSeed)
			}
			reorgs.install(n, reorgSeed, cmd.OutOrStdout())
			<-cmd.Context().Done()
			return n.Close()
		},
	}
	cmd.Flags().StringVar(&archive, "archive", "", "archive directory written by gen-archive")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8545", "listen address; beyond loopback only with --listen-public")
	registerListenPublic(cmd)
	cmd.Flags().DurationVar(&interval, "block-interval", 12*time.Second, "virtual block time")
	cmd.Flags().Float64Var(&speed, "speed", 1, "wall clock runs this many times faster")
	cmd.Flags().IntVar(&initial, "initial-blocks", 0, "blocks already mined at start")
	cmd.Flags().Int64Var(&seed, "seed", 0, "chain seed (default: the archive's, from its manifest)")
	cmd.Flags().Float64Var(&reorgs.rate, "reorg-rate", 0, "fraction of head requests before which the chain reorganises (0: never)")
	cmd.Flags().IntVar(&reorgs.depth, "reorg-depth", 8, "with --reorg-rate: the deepest reorganisation, in blocks (each is 1..N deep)")
	cmd.Flags().Int64Var(&reorgSeed, "reorg-seed", 1, "with --reorg-rate: the seed of the reorganisations")
	cmd.Flags().DurationVar(&faults.Latency, "latency", 0, "fault injection: delay added to every request")
	cmd.Flags().Float64Var(&faults.Rate429, "rate-429", 0, "fault injection: fraction of requests answered 429 with Retry-After")
	cmd.Flags().Float64Var(&faults.Rate5xx, "rate-5xx", 0, "fault injection: fraction of requests answered 503")
	cmd.Flags().DurationVar(&faults.RetryAfter, "retry-after", time.Second, "Retry-After of 429 answers")
	cmd.Flags().Int64Var(&faults.Seed, "fault-seed", 1, "fault injection seed")
	return cmd
}
