package cli

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/webview"
)

// defaultListen is pipec ui's address: loopback only.
const defaultListen = "127.0.0.1:8321"

type uiOptions struct {
	state  stateFlag
	listen string
	specs  []string
}

func newUICmd(io IO) *cobra.Command {
	var opts uiOptions
	cmd := &cobra.Command{
		Use:   "ui [--state S] [--listen 127.0.0.1:8321] [--spec SPEC]...",
		Short: "Serve a read-only web view of a state: runs, a run's DAG and timeline, artifacts, workers",
		Long: "ui serves web pages over a state (an SQLite file or a PostgreSQL URL): the runs, filterable by\n" +
			"pipeline and state; one run's DAG with each task's state and its timeline (one bar per attempt\n" +
			"with its token, worker, class and exit code; relaunches, unknown attempts, fenced publishes,\n" +
			"failovers and waiting marked); an artifact's visible version per interval with its lineage; and\n" +
			"the workers. A running run's page refreshes itself. The pages only read the state.\n\n" +
			"It listens on 127.0.0.1:8321 and has no login: another address must be given with --listen, with\n" +
			"its host written out (0.0.0.0:8321 for every interface, not :8321), and then anyone who reaches it\n" +
			"reads the state's runs. Secret values never reach the state (the runtime masks them); the pages\n" +
			"also mask the values of the secret_env names of the specs given, read from this environment.\n\n" +
			"The state keeps the DAG of submitted runs only; give the spec of a pipeline (--spec, repeatable)\n" +
			"to draw the DAG of its runs made by pipec run, and to show which old versions its sinks hold.\n" +
			"The state is --state, else PIPEC_STATE, else .pipec/state.db beside the first spec, else here.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUI(cmd.Context(), io, opts, cmd.Flags().Changed("listen"))
		},
	}
	opts.state.registerHelp(cmd, stateBesideSpecFlag)
	cmd.Flags().StringVar(&opts.listen, "listen", defaultListen, "the address to serve on; a non-loopback one must be given explicitly")
	cmd.Flags().StringArrayVar(&opts.specs, "spec", nil, "a pipeline's spec or plan file: draws the DAG of its local runs (repeatable)")
	return cmd
}

// checkListen refuses an address that is not loopback unless it was given
// explicitly, with its host written out.
func checkListen(addr string, explicit bool) (loopback bool, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, usageErr("ui: --listen %q: %v", addr, err)
	}
	if host == "localhost" {
		return true, nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true, nil
	}
	if !explicit {
		return false, usageErr("ui: %s is not a loopback address: give it with --listen to serve it", addr)
	}
	if host == "" {
		return false, usageErr("ui: --listen %s serves every interface without a login: write the host out (0.0.0.0%s) if that is meant", addr, addr)
	}
	return false, nil
}

// viewSource opens the state and the given specs for ui and report.
func viewSource(ctx context.Context, io IO, sf *stateFlag, specs []string) (*webview.Source, store.Location, func(), error) {
	first := ""
	if len(specs) > 0 {
		first = specs[0]
	}
	var plans []*compiler.Plan
	var given []webview.Spec
	for _, sp := range specs {
		p, err := loadPlan(io, sp)
		if err != nil {
			return nil, store.Location{}, nil, err
		}
		plans = append(plans, p)
		given = append(given, webview.Spec{Plan: p, Dir: filepath.Dir(sp)})
	}
	loc, err := sf.location(io, first)
	if err != nil {
		return nil, loc, nil, err
	}
	st, err := openState(ctx, io, loc, true)
	if err != nil {
		return nil, loc, nil, err
	}
	src := &webview.Source{Store: st, Queue: st, Specs: given, Redactor: webview.SecretsOf(plans, io.Getenv)}
	return src, loc, func() { st.Close() }, nil
}

func runUI(ctx context.Context, io IO, opts uiOptions, explicit bool) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if io.Getenv == nil {
		io.Getenv = func(string) string { return "" }
	}
	loopback, err := checkListen(opts.listen, explicit)
	if err != nil {
		return err
	}
	src, loc, closeState, err := viewSource(ctx, io, &opts.state, opts.specs)
	if err != nil {
		return err
	}
	defer closeState()
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return usageErr("ui: %v", err)
	}
	srv := &http.Server{
		Handler:           (&webview.Server{Src: src, StateName: loc.String(), Log: log.New(io.Stderr, "pipec: ", 0)}).Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if !loopback {
		fmt.Fprintf(io.Stderr, "pipec: ui: serving %s without a login: anyone who reaches it reads this state's runs\n", opts.listen)
	}
	fmt.Fprintf(io.Stdout, "pipec ui: state %s at http://%s/ (read-only; Ctrl-C stops)\n", loc, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			return &exitError{Code: ExitFindings, Err: fmt.Errorf("ui: %v", err)}
		}
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	return nil
}
