package webview

import (
	"fmt"
	"strings"
	"time"

	"github.com/pipec/pipec/webview/layout"
)

// DAGView is the run's DAG laid out for SVG.
type DAGView struct {
	W, H      int
	Nodes     []DAGNode
	Edges     []DAGEdge
	Crossings int
}

// DAGNode is one task box.
type DAGNode struct {
	Name, State, Label string
	X, Y, W, H         int
	TX, TY             int // text anchor
}

// DAGEdge is one drawn edge, an SVG path.
type DAGEdge struct {
	From, To, D string
}

// DAG lays the run's tasks out.
func (v *RunView) DAG() DAGView {
	names := make([]string, len(v.Tasks))
	needs := map[string][]string{}
	state := map[string]string{}
	for i, t := range v.Tasks {
		names[i] = t.Name
		needs[t.Name] = t.Needs
		state[t.Name] = t.State
	}
	g := layout.Layout(names, needs)
	out := DAGView{W: g.W, H: g.H, Crossings: g.Crossings}
	for _, n := range g.Nodes {
		out.Nodes = append(out.Nodes, DAGNode{Name: n.Name, State: state[n.Name], Label: clip(n.Name, 20),
			X: n.X, Y: n.Y, W: layout.NodeW, H: layout.NodeH, TX: n.X + 10, TY: n.Y + layout.NodeH/2 + 5})
	}
	for _, e := range g.Edges {
		var b strings.Builder
		p := e.Points
		fmt.Fprintf(&b, "M%d,%d", p[0].X, p[0].Y)
		for i := 1; i < len(p); i++ {
			if p[i].Y == p[i-1].Y {
				fmt.Fprintf(&b, " L%d,%d", p[i].X, p[i].Y)
				continue
			}
			mx := (p[i-1].X + p[i].X) / 2
			fmt.Fprintf(&b, " C%d,%d %d,%d %d,%d", mx, p[i-1].Y, mx, p[i].Y, p[i].X, p[i].Y)
		}
		out.Edges = append(out.Edges, DAGEdge{From: e.From, To: e.To, D: b.String()})
	}
	return out
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Timeline geometry, in SVG units.
const (
	tlLabel = 190  // task name column
	tlWidth = 1000 // time axis
	tlBar   = 16
	tlTop   = 24 // axis labels
)

// TimelineView is the timeline laid out for SVG.
type TimelineView struct {
	W, H  int
	Axis  int // x of the time axis's start
	Rows  []TLRow
	Ticks []TLTick
}

// TLRow is one task's row.
type TLRow struct {
	Task, State string
	Y, H, TextY int
	Waits       []TLSeg
	Bars        []TLBar
	Marks       []TLMark
}

// TLSeg is a stretch of waiting (queued for a slot or a worker, backing off
// before a retry).
type TLSeg struct {
	X, W, Y int
	Why     string
}

// TLBar is one attempt.
type TLBar struct {
	A          *AttemptView
	X, W, Y, H int
	// UX is where the attempt became unknown (0: it did not), UW how
	// long the bar goes on after that.
	UX, UW int
	Label  string
	Title  string
}

// TLMark is an event on a row.
type TLMark struct {
	Kind, Text, Sym string
	X, Y            int
	Attempt         int
}

// TLTick is a time axis label.
type TLTick struct {
	X     int
	Label string
}

// Timeline lays the attempts out on one time axis from the run's creation
// to its end (or now).
func (v *RunView) Timeline() TimelineView {
	t0, t1 := v.Run.Created, v.End
	for _, t := range v.Tasks {
		for _, a := range t.Attempts {
			if !a.Queued.IsZero() && a.Queued.Before(t0) {
				t0 = a.Queued
			}
			if a.Ended.After(t1) {
				t1 = a.Ended
			}
		}
	}
	for _, m := range v.Marks {
		if m.Time.After(t1) {
			t1 = m.Time
		}
	}
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Millisecond
	}
	x := func(t time.Time) int {
		if t.IsZero() {
			return tlLabel
		}
		d := t.Sub(t0)
		return tlLabel + int(int64(d)*tlWidth/int64(span))
	}
	tv := TimelineView{W: tlLabel + tlWidth + 40, Axis: tlLabel}
	for i := 0; i <= 5; i++ {
		d := time.Duration(int64(span) * int64(i) / 5)
		tv.Ticks = append(tv.Ticks, TLTick{X: tlLabel + tlWidth*i/5, Label: "+" + roundDur(d)})
	}
	// When each task could start: the run's start, or when the last of the
	// tasks it needs ended. Until its first attempt got a token it waited
	// (for a worker, a pool slot or a run slot).
	byName := make(map[string]*TaskView, len(v.Tasks))
	for _, t := range v.Tasks {
		byName[t.Name] = t
	}
	readyAt := func(t *TaskView) time.Time {
		at := v.Run.Created
		for _, n := range t.Needs {
			u := byName[n]
			if u == nil || len(u.Attempts) == 0 {
				return time.Time{} // never ran, or reused: unknown
			}
			if e := u.Attempts[len(u.Attempts)-1].Ended; e.After(at) {
				at = e
			}
		}
		return at
	}
	y := tlTop
	for _, t := range v.Tasks {
		row := TLRow{Task: t.Name, State: t.State, Y: y}
		// Attempts that overlap on the screen (a relaunch beside its
		// unknown predecessor, still running) get lanes of their own.
		var lanes []int         // right edge of each lane
		var laneEnd []time.Time // when its last attempt ended
		var prevEnd time.Time
		for _, a := range t.Attempts {
			start := a.Started
			if start.IsZero() {
				start = cmp0(a.Queued, a.Ended)
			}
			end := a.Ended
			if end.IsZero() {
				end = v.End
				if a.State == "unknown" && !a.Unknown.IsZero() && v.Run.State != "running" {
					end = a.Unknown
				}
			}
			if start.IsZero() {
				start = end
			}
			wx := x(cmp0(a.Queued, start))
			if !prevEnd.IsZero() && !a.Queued.IsZero() && a.Queued.After(prevEnd) {
				wx = x(prevEnd)
			}
			bx, bw := x(start), max(x(end)-x(start), 3)
			// An attempt that starts before another of the lane ended
			// (judged on time, so a retry stays in line however short
			// its bars are drawn) takes the next lane.
			lane := 0
			for lane < len(lanes) && laneEnd[lane].After(start) {
				lane++
			}
			if lane == len(lanes) {
				lanes, laneEnd = append(lanes, 0), append(laneEnd, time.Time{})
			}
			// Waiting is drawn where the lane is free.
			free := lanes[lane]
			lanes[lane], laneEnd[lane] = bx+bw+1, end
			by := y + 16 + lane*(tlBar+16)
			seg := func(from, to int, why string) {
				from = max(from, free)
				if to > from {
					row.Waits = append(row.Waits, TLSeg{X: from, W: to - from, Y: by + 3, Why: why})
				}
			}
			if !prevEnd.IsZero() && !a.Queued.IsZero() && a.Queued.After(prevEnd) {
				seg(wx, x(a.Queued), "waiting to retry")
			}
			if a == t.Attempts[0] && !a.Queued.IsZero() {
				if r := readyAt(t); !r.IsZero() && a.Queued.Sub(r) > span/200 {
					seg(x(r), x(a.Queued), "ready, waiting for a worker or a slot")
				}
			}
			if !a.Queued.IsZero() && start.After(a.Queued) {
				seg(x(a.Queued), bx, "queued: waiting to start")
			}
			bar := TLBar{A: a, X: bx, W: bw, Y: by, H: tlBar}
			if !a.Unknown.IsZero() {
				bar.UX = x(a.Unknown)
				bar.UW = max(bx+bw-bar.UX, 0)
			}
			bar.Label = fmt.Sprintf("#%d t%d", a.Number, a.Token)
			if bar.W < 7*len(bar.Label) {
				bar.Label = ""
			}
			bar.Title = attemptTitle(a)
			row.Bars = append(row.Bars, bar)
			if a.Ended.IsZero() || end.After(prevEnd) {
				prevEnd = end
			}
			for _, m := range a.Marks {
				row.Marks = append(row.Marks, TLMark{Kind: m.Kind, Text: m.Text, Sym: symbol(m.Kind), X: x(m.Time), Y: by - 15, Attempt: m.Attempt})
			}
		}
		for _, m := range t.Waiting {
			row.Marks = append(row.Marks, TLMark{Kind: m.Kind, Text: m.Text, Sym: symbol(m.Kind), X: x(m.Time), Y: y + 1})
		}
		row.H = max(len(lanes), 1)*(tlBar+16) + 4
		row.TextY = y + 16 + tlBar - 4
		y += row.H
		tv.Rows = append(tv.Rows, row)
	}
	tv.H = y + 8
	return tv
}

func cmp0(a, b time.Time) time.Time {
	if a.IsZero() {
		return b
	}
	return a
}

func attemptTitle(a *AttemptView) string {
	s := fmt.Sprintf("%s #%d: %s, token %d", a.Task, a.Number, a.State, a.Token)
	if a.Worker != "" {
		s += ", worker " + a.Worker
	}
	if a.Class != "" {
		s += ", class " + a.Class
	}
	if a.State == "failed" || a.ExitCode != 0 {
		s += fmt.Sprintf(", exit code %d", a.ExitCode)
	}
	if d := duration(a.Started, a.Ended); d != "" {
		s += ", ran " + d
	}
	return s
}

// symbol is a mark's glyph on the timeline.
func symbol(kind string) string {
	switch kind {
	case "fenced":
		return "⊘"
	case "relaunch":
		return "↻"
	case "unknown":
		return "?"
	case "failover", "lease_lost":
		return "⇄"
	case "retry":
		return "↺"
	case "waiting":
		return "…"
	case "published":
		return "✓"
	case "rejected":
		return "✗"
	}
	return "•"
}

func roundDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
