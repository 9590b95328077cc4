package bus

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Relation is the condition a routing rule puts on a pair of agents.
type Relation string

// The relations a rule can require.
const (
	RelAny    Relation = "any"    // any agent of that tier
	RelChild  Relation = "child"  // only the sender's own children (a command agent's PMs, a PM's workers)
	RelParent Relation = "parent" // only the sender's own parent (a worker's PM, a PM's command agent)
	RelNever  Relation = "forbid" // never
)

// Rules is the tier routing table: for each "from->to" pair of tiers, which
// relation the recipient must have to the sender. Pairs not listed are
// forbidden.
type Rules map[string]Relation

// DefaultRules is the table of the bus spec: command agents talk to each
// other and to their own PMs; PMs talk to their command agent and their own
// workers; workers talk only to their PM.
func DefaultRules() Rules {
	return Rules{
		"command->command": RelAny,
		"command->pm":      RelChild,
		"command->worker":  RelNever,
		"pm->command":      RelParent,
		"pm->pm":           RelNever,
		"pm->worker":       RelChild,
		"worker->command":  RelNever,
		"worker->pm":       RelParent,
		"worker->worker":   RelNever,
	}
}

// LoadRules reads a JSON routing table ({"pm->pm": "any", ...}) and lays it
// over the defaults, so a deployment only states what it changes.
func LoadRules(path string) (Rules, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("routing rules: %w", err)
	}
	var over map[string]Relation
	if err := json.Unmarshal(b, &over); err != nil {
		return nil, fmt.Errorf("routing rules %s: %w", path, err)
	}
	r := DefaultRules()
	for k, v := range over {
		parts := strings.Split(k, "->")
		if len(parts) != 2 || !protocol.Tier(parts[0]).Valid() || !protocol.Tier(parts[1]).Valid() {
			return nil, fmt.Errorf("routing rules %s: key %q must be TIER->TIER with tiers command, pm, worker", path, k)
		}
		switch v {
		case RelAny, RelChild, RelParent, RelNever:
		default:
			return nil, fmt.Errorf("routing rules %s: %q: relation must be any, child, parent or forbid", path, k)
		}
		r[k] = v
	}
	return r, nil
}

// Check decides whether from may send to to. A refusal is an E001
// forbidden_route naming the rule and the path that is allowed.
func (r Rules) Check(from, to agent.Agent) error {
	key := string(from.Tier) + "->" + string(to.Tier)
	rel := r[key]
	ok := false
	switch rel {
	case RelAny:
		ok = true
	case RelChild:
		ok = to.ParentID == from.ID
	case RelParent:
		ok = from.ParentID == to.ID
	}
	if ok {
		return nil
	}
	return &protocol.Error{Class: protocol.ClassPermission, Code: "forbidden_route",
		Message:    fmt.Sprintf("routing rule %s (%s): %s", key, describe(rel), r.allowedPath(from, to)),
		NextAction: r.allowedPath(from, to),
		Extra:      map[string]any{"rule": key, "relation": string(rel)},
	}
}

func describe(rel Relation) string {
	switch rel {
	case RelChild:
		return "only to the sender's own children"
	case RelParent:
		return "only to the sender's own parent"
	case RelAny:
		return "allowed"
	}
	return "forbidden"
}

// allowedPath explains how the message could travel instead.
func (r Rules) allowedPath(from, to agent.Agent) string {
	switch {
	case from.Tier == protocol.TierWorker && from.ParentID != "":
		return fmt.Sprintf("send it to your PM %s, who can forward it", from.ParentID)
	case from.Tier == protocol.TierPM && to.Tier != protocol.TierWorker && from.ParentID != "":
		return fmt.Sprintf("go through your command agent %s", from.ParentID)
	case from.Tier == protocol.TierPM && to.Tier == protocol.TierWorker && to.ParentID != "":
		return fmt.Sprintf("that worker belongs to PM %s; go through that PM or through command", to.ParentID)
	case from.Tier == protocol.TierCommand && to.Tier == protocol.TierWorker && to.ParentID != "":
		return fmt.Sprintf("go through the worker's PM %s", to.ParentID)
	case from.Tier == protocol.TierCommand && to.Tier == protocol.TierPM:
		return fmt.Sprintf("that PM reports to %s; ask that command agent", dashIfEmpty(to.ParentID))
	}
	return "no direct path between these tiers; route through an agent of a tier allowed to reach both"
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "no command agent"
	}
	return s
}
