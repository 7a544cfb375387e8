package cli

import "github.com/spf13/cobra"

// commands lists every subcommand. Each lives in its own file with its own
// options struct.
func commands(io IO) []*cobra.Command {
	return []*cobra.Command{
		newCompileCmd(io),
		newGraphCmd(io),
		newFmtCmd(io),
		newLintCmd(io),
		newExplainCmd(io),
		newVersionCmd(io),
		newRunCmd(io),
		newStatusCmd(io),
		newEventsCmd(io),
		newHeartbeatCmd(io),
		newBackfillCmd(io),
		newResolveCmd(io),
		newCancelCmd(io),
		newShowCmd(io),
		newGCCmd(io),
		newSinkCmd(io),
		newArtifactsCmd(io),
		newLSPCmd(io),
		newSimulateCmd(io),
		newWorkerCmd(io),
		newWorkersCmd(io),
		newSubmitCmd(io),
		newUICmd(io),
		newReportCmd(io),
	}
}
