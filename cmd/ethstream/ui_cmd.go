package main

import (
	"fmt"
	"io"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ui"
	"github.com/spf13/cobra"
)

// uiFlags are --ui-addr and --ui-wait of run and demo.
type uiFlags struct {
	addr string
	wait bool
}

func (f *uiFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.addr, "ui-addr", "", "serve the live dashboard on HOST:PORT (e.g. 127.0.0.1:4040; port 0 picks a free one; beyond loopback only with --listen-public)")
	c.Flags().BoolVar(&f.wait, "ui-wait", false, "with --ui-addr: keep serving the dashboard after the end until interrupted (Ctrl-C)")
	registerListenPublic(c)
}

// serve starts the dashboard and prints its address to out.
func (f *uiFlags) serve(d *ui.Dashboard, out io.Writer) (*ui.Server, error) {
	s, err := ui.Serve(d, f.addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "dashboard: %s\n", s.URL())
	return s, nil
}

// finish keeps the dashboard up until the command's context ends if --ui-wait
// was given, then closes it.
func (f *uiFlags) finish(cmd *cobra.Command, s *ui.Server) error {
	if s == nil {
		return nil
	}
	if f.wait {
		fmt.Fprintf(cmd.OutOrStdout(), "dashboard still at %s; press Ctrl-C to stop\n", s.URL())
		<-cmd.Context().Done()
	}
	return s.Close()
}

func newUICmd() *cobra.Command {
	var checkpoint, addr string
	c := &cobra.Command{
		Use:   "ui --checkpoint DIR [--ui-addr 127.0.0.1:4040] [--listen-public]",
		Short: "Serve the dashboard of a checkpoint: its batches from its progress log, its offset log, live if a query still runs on it",
		Long: `ui serves the same dashboard as run --ui-addr for a checkpoint on disk: the charts of
every batch recorded in the checkpoint's progress log (<checkpoint>/progress/), the sources of the newest batch and the
offset log as it is on disk. It only reads, so it is safe beside a running query, whose new
batches then appear as they commit. It runs until interrupted.`,
		Example: `  ethstream ui --checkpoint work/checkpoint            # then open http://127.0.0.1:4040/`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs, dir, err := store(cmd.Context(), "--checkpoint", checkpoint)
			if err != nil {
				return err
			}
			if st, err := fs.Stat(dir); err != nil || !st.IsDir() {
				return errcode.New(errcode.InvalidArgument, checkpoint, "pass the checkpoint directory of a query to --checkpoint",
					"checkpoint directory %s does not exist", checkpoint)
			}
			d := ui.New(ui.Options{FS: fs, Checkpoint: dir, Mode: ui.ModeUI})
			f := uiFlags{addr: addr, wait: true}
			s, err := f.serve(d, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			<-cmd.Context().Done()
			return s.Close()
		},
	}
	c.Flags().StringVar(&checkpoint, "checkpoint", "", "checkpoint directory (required)")
	c.Flags().StringVar(&addr, "ui-addr", "127.0.0.1:4040", "serve the dashboard on HOST:PORT (port 0 picks a free one; beyond loopback only with --listen-public)")
	registerListenPublic(c)
	_ = c.MarkFlagRequired("checkpoint")
	return c
}

func init() { rootCmd.AddCommand(newUICmd()) }
