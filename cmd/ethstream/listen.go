package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// listenPublicFlag lets a listener bind beyond loopback. Without it an
// address whose host is not a loopback address (0.0.0.0:P, :P, a LAN IP, a
// host name other than localhost) is refused: none of the servers
// authenticates its clients (docs/contracts.md, CLI).
const listenPublicFlag = "listen-public"

// exposes says, per listening flag of a command ("serve-s3 --addr"), what a
// client reaching that address can do: the text logged when it is public.
var exposes = map[string]string{
	"serve-s3 --addr":    "every file under --root, to read and, with PUT and DELETE, to write, to any client unless --access-key requires signed requests",
	"node --addr":        "the JSON-RPC chain (read-only), without authentication",
	"ui --ui-addr":       "the dashboard: the checkpoint's progress log, offsets and source names (read-only)",
	"run --ui-addr":      "the dashboard: the query's progress, offsets and source names (read-only)",
	"demo --ui-addr":     "the dashboard: the demo's progress, offsets and source names (read-only)",
	"run --metrics-addr": "the Prometheus metrics: batch counts, durations, rows and source counters (read-only)",
}

// registerListenPublic adds --listen-public to a command with a listener.
func registerListenPublic(c *cobra.Command) {
	c.Flags().Bool(listenPublicFlag, false, "allow a listening address beyond loopback (0.0.0.0:P, :P, a LAN address); the server authenticates nobody")
}

// checkListeners refuses, from the command line alone, a listening flag that
// binds beyond loopback without --listen-public, and with it logs what each
// public listener exposes. An address that does not parse is left to the
// listener, whose error names the reason.
func checkListeners(cmd *cobra.Command) error {
	public, _ := cmd.Flags().GetBool(listenPublicFlag)
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		what, ok := exposes[cmd.Name()+" --"+f.Name]
		if err != nil || !ok {
			return
		}
		err = checkListen(cmd, f.Name, f.Value.String(), public, what)
	})
	if err != nil {
		return err
	}
	// Defaults are loopback, but say so if a default ever is not.
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if what, ok := exposes[cmd.Name()+" --"+f.Name]; ok && !f.Changed && err == nil {
			err = checkListen(cmd, f.Name, f.DefValue, public, what)
		}
	})
	return err
}

func checkListen(cmd *cobra.Command, flag, addr string, public bool, what string) error {
	if addr == "" || isLoopback(addr) {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil // the listener refuses it with its own reason
	}
	if !public {
		return usage(errcode.New(errcode.InvalidArgument, "",
			fmt.Sprintf("pass --%s 127.0.0.1:PORT (loopback), or add --%s to expose it beyond this machine", flag, listenPublicFlag),
			"--%s %s listens beyond loopback; it would expose %s", flag, addr, what))
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "warning: --%s %s listens beyond loopback (--%s): it exposes %s to every host that can reach it\n",
		flag, addr, listenPublicFlag, what)
	return nil
}

// isLoopback reports whether addr's host is a loopback address or
// "localhost" (never resolved: the check sends nothing).
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
