package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/pipec/pipec/cli"
	"github.com/pipec/pipec/internal/tracked"
)

// TestMain lets testscript run `pipec` as a real subprocess built from this
// test binary, so scripts see true exit codes and output streams.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"pipec": func() { os.Exit(cli.Process(os.Args[1:])) },
		// pipec-status runs pipec, then prints "exit status N" on stderr and
		// exits 0, so a script can assert the exact exit code.
		"pipec-status": func() {
			code := cli.Process(os.Args[1:])
			fmt.Fprintf(os.Stderr, "exit status %d\n", code)
		},
	})
}

// TestScripts runs cli/testdata/script/*.txtar: each shows a command, its
// exit code and its exact output. $EXAMPLES is a copy of the repository's
// files under examples/ (not what a run or a user left there); scripts copy
// from it so printed paths stay relative.
func TestScripts(t *testing.T) {
	examples := filepath.Join(t.TempDir(), "examples")
	tracked.Copy(t, filepath.Join("..", "examples"), examples)
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		UpdateScripts:       os.Getenv("PIPEC_UPDATE_GOLDEN") != "",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile": waitFile,
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("EXAMPLES", examples)
			env.Setenv("NO_COLOR", "1")
			return nil
		},
	})
}

// waitFile is the script command "waitfile PATH [REGEXP]": it waits (at most
// a minute) until PATH exists and, with REGEXP, until its content matches.
// Scripts with processes in the background use it to act at a known moment
// of theirs instead of sleeping.
func waitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitfile PATH [REGEXP]")
	}
	var re *regexp.Regexp
	if len(args) == 2 {
		re = regexp.MustCompile(args[1])
	}
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(path)
		if err == nil && (re == nil || re.Match(b)) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfile %s: not there (or not matching) after a minute: %q, %v", args[0], b, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
