package cli

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/lint/lintcmd"
	"github.com/pipec/pipec/spec/cuespec"
	"github.com/pipec/pipec/spec/specload"
)

// newLintCmd is lintcmd's command, with both spec languages: pipec-lint
// builds the same command with HCL alone.
func newLintCmd(io IO) *cobra.Command {
	cmd := lintcmd.New(io.lintIO(), specload.Both{}, version())
	cmd.Args = minArgs(1)
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if dir := chunkCacheDir(io.Getenv); dir != "" {
			cuespec.CacheCUEChunksIn(dir)
		}
		return fromLintErr(run(cmd, args))
	}
	return cmd
}

// chunkCacheDir is the folder where lint keeps the chunks of CUE specs that
// CUE found valid (cuespec.CacheCUEChunksIn): PIPEC_CACHE when set ("off"
// turns the cache off), else pipec/cue-chunks in the user's cache folder
// ($XDG_CACHE_HOME or ~/.cache on Linux), like Go's build cache. "" when
// there is none.
func chunkCacheDir(getenv func(string) string) string {
	if getenv == nil {
		return ""
	}
	switch v := getenv("PIPEC_CACHE"); v {
	case "off":
		return ""
	case "":
	default:
		return filepath.Join(v, "cue-chunks")
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(base, "pipec", "cue-chunks")
}

// lintIO is io as lintcmd takes it.
func (io IO) lintIO() lintcmd.IO {
	return lintcmd.IO{Stdin: io.Stdin, Stdout: io.Stdout, Stderr: io.Stderr, Getenv: io.Getenv,
		Color: io.colorOn, StdoutTTY: io.StdoutTTY, StderrTTY: io.StderrTTY}
}

// fromLintErr turns lintcmd's exit codes into pipec's.
func fromLintErr(err error) error {
	var ee *lintcmd.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.Code, err: ee.Err}
	}
	return err
}

// loadConfig finds the configuration file (or reads the one named), as lint
// does (lintcmd.LoadConfig).
func loadConfig(io IO, named string) (*config.Config, error) {
	cfg, err := lintcmd.LoadConfig(io.lintIO(), named)
	return cfg, fromLintErr(err)
}
