package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/pipec/pipec/diag"
)

// GitHub writes one workflow command per finding,
//
//	::error file=F,line=L,col=C,endLine=L2,endColumn=C2,title=RULE::message
//
// which GitHub Actions turns into annotations on the pull request. Warnings
// become ::warning and info ::notice. GitHub accepts columns only for a
// single-line range, and its endColumn is the last character (inclusive),
// while pipec's ranges end one past it.
func GitHub(w io.Writer, ds diag.Diagnostics) error {
	var b strings.Builder
	for _, d := range ds {
		cmd := "error"
		switch d.Severity {
		case diag.Warning:
			cmd = "warning"
		case diag.Info:
			cmd = "notice"
		}
		var props []string
		r := d.Range
		if r.Filename != "" {
			props = append(props, "file="+escapeProperty(r.Filename))
		}
		if r.Start.Line >= 1 {
			props = append(props, fmt.Sprintf("line=%d", r.Start.Line))
			oneLine := r.End.Line == r.Start.Line || r.End.Line == 0
			if oneLine && r.Start.Column >= 1 {
				props = append(props, fmt.Sprintf("col=%d", r.Start.Column))
			}
			if r.End.Line > r.Start.Line {
				props = append(props, fmt.Sprintf("endLine=%d", r.End.Line))
			} else if r.End.Line == r.Start.Line && r.Start.Column >= 1 {
				props = append(props, fmt.Sprintf("endLine=%d", r.End.Line),
					fmt.Sprintf("endColumn=%d", max(r.Start.Column, r.End.Column-1)))
			}
		}
		if d.Rule != "" {
			props = append(props, "title="+escapeProperty(d.Rule))
		}
		msg := d.Message
		if det := strings.TrimSpace(d.Detail); det != "" {
			msg += "\n" + det
		}
		b.WriteString("::" + cmd)
		if len(props) > 0 {
			b.WriteString(" " + strings.Join(props, ","))
		}
		// Escape first: the job log is a terminal too.
		b.WriteString("::" + escapeData(Escape(msg)) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// escapeData escapes a workflow command's message as the Actions runner
// expects (the rules of @actions/core's toCommandValue/escapeData).
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// escapeProperty escapes a property value; ':' and ',' would otherwise end it.
func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
