package console

import (
	"fmt"

	"github.com/switchboard-hub/switchboard/internal/pipeline"
)

// DAG is a pipeline execution's steps laid out for an SVG drawing: one
// column per depth (a step sits one column right of its deepest
// upstream), steps of a column stacked in pipeline order.
type DAG struct {
	Width, Height int
	Nodes         []DAGNode
	Edges         []DAGEdge
}

// DAGNode is one step box.
type DAGNode struct {
	ID, Label, Status string
	X, Y, W, H        int
	TextX, TextY      int
	StatusY           int
}

// DAGEdge is an upstream → downstream curve (an SVG path).
type DAGEdge struct {
	Path     string
	From, To string
}

const (
	nodeW, nodeH = 170, 48
	gapX, gapY   = 56, 18
	pad          = 8
	labelRunes   = 20
)

func layoutDAG(steps []pipeline.StepState) DAG {
	index := map[string]int{}
	for i, s := range steps {
		index[s.SkillID] = i
	}
	depth := make([]int, len(steps))
	state := make([]int, len(steps)) // 0 new, 1 visiting, 2 done
	var visit func(i int) int
	visit = func(i int) int {
		switch state[i] {
		case 1:
			return 0 // a cycle cannot come from a valid plan; draw it flat
		case 2:
			return depth[i]
		}
		state[i] = 1
		d := 0
		for _, u := range steps[i].Upstream {
			if j, ok := index[u]; ok {
				d = max(d, visit(j)+1)
			}
		}
		depth[i], state[i] = d, 2
		return d
	}
	rows := map[int]int{}
	var g DAG
	pos := make([]DAGNode, len(steps))
	for i, s := range steps {
		d := visit(i)
		r := rows[d]
		rows[d]++
		x, y := pad+d*(nodeW+gapX), pad+r*(nodeH+gapY)
		pos[i] = DAGNode{ID: s.SkillID, Label: truncRunes(s.SkillID, labelRunes), Status: string(s.Status), X: x, Y: y, W: nodeW, H: nodeH,
			TextX: x + 10, TextY: y + 20, StatusY: y + 38}
		g.Width = max(g.Width, x+nodeW+pad)
		g.Height = max(g.Height, y+nodeH+pad)
	}
	g.Nodes = pos
	for i, s := range steps {
		for _, u := range s.Upstream {
			j, ok := index[u]
			if !ok {
				continue
			}
			a, b := pos[j], pos[i]
			x1, y1 := a.X+a.W, a.Y+a.H/2
			x2, y2 := b.X, b.Y+b.H/2
			mid := (x1 + x2) / 2
			g.Edges = append(g.Edges, DAGEdge{From: u, To: s.SkillID, Path: fmt.Sprintf("M%d %d C%d %d, %d %d, %d %d", x1, y1, mid, y1, mid, y2, x2, y2)})
		}
	}
	return g
}

func truncRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
